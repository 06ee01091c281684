from django.urls import path

from . import views, views_maintenance

app_name = "hosts"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("hosts/rows/", views.dashboard_rows, name="dashboard_rows"),
    path("hosts/<str:name>/", views.host_detail, name="detail"),
    path("hosts/<str:name>/probe/", views.probe_now, name="probe"),
    path("hosts/<str:name>/probe-status/", views.probe_status, name="probe_status"),
    path("hosts/<str:name>/gpu-series.json", views.gpu_series, name="gpu_series"),
    path("hosts/<str:name>/accept-key/", views.accept_host_key, name="accept_key"),
    path("hosts/<str:name>/units/<str:unit>/journal/", views.unit_journal, name="journal"),
    path("hosts/<str:name>/maintenance/", views_maintenance.maintenance, name="maintenance"),
    path(
        "hosts/<str:name>/maintenance/leave/",
        views_maintenance.maintenance_leave,
        name="maintenance_leave",
    ),
    path("snapshots/<int:pk>/", views.snapshot_detail, name="snapshot"),
]
