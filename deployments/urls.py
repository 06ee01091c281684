from django.urls import path

from . import views

app_name = "deployments"

urlpatterns = [
    path("deployments/<int:pk>/change/<str:kind>/", views.change_form, name="change_form"),
    path(
        "deployments/<int:pk>/change/<str:kind>/preflight/",
        views.change_preflight,
        name="change_preflight",
    ),
    path(
        "deployments/<int:pk>/change/<str:kind>/probe/",
        views.change_form_probe,
        name="change_form_probe",
    ),
    path(
        "deployments/<int:pk>/change/<str:kind>/snapshot/",
        views.change_form_snapshot,
        name="change_form_snapshot",
    ),
    path("deployments/<int:pk>/revisions/", views.revisions, name="revisions"),
    path("changes/", views.change_list, name="changes"),
    path("changes/<int:pk>/", views.change_detail, name="change"),
    path("changes/<int:pk>/approve/", views.change_approve, name="approve"),
    path("changes/<int:pk>/reject/", views.change_reject, name="reject"),
    path("changes/<int:pk>/break-glass/", views.change_break_glass, name="break_glass"),
    path("changes/<int:pk>/cancel/", views.change_cancel, name="cancel"),
    path("approvals/", views.approvals, name="approvals"),
    path("hosts/<str:name>/gpu-diagnostic/", views.gpu_diagnostic, name="gpu_diagnostic"),
]
