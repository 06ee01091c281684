from django.urls import URLPattern, URLResolver, path

from . import views

app_name = "notifications"

urlpatterns: list[URLPattern | URLResolver] = [
    path("notifications/", views.index, name="index"),
    path("notifications/endpoints/new/", views.endpoint_create, name="endpoint_create"),
    path("notifications/endpoints/<int:pk>/edit/", views.endpoint_edit, name="endpoint_edit"),
    path(
        "notifications/endpoints/<int:pk>/active/",
        views.endpoint_set_active,
        name="endpoint_active",
    ),
    path("notifications/endpoints/<int:pk>/delete/", views.endpoint_delete, name="endpoint_delete"),
    path("notifications/endpoints/<int:pk>/test/", views.endpoint_test, name="endpoint_test"),
    path("notifications/deliveries/<int:pk>/", views.delivery_detail, name="delivery"),
]
