from django.urls import path

from . import views

app_name = "audit"

urlpatterns = [
    path("", views.history, name="history"),
    path("verify/", views.verify_now, name="verify"),
    path("events/<int:seq>/", views.event_detail, name="event"),
    path("hosts/<int:host_id>/timeline/", views.host_timeline, name="host_timeline"),
    path("export.csv", views.export_csv, name="export_csv"),
    path("export.jsonl", views.export_jsonl, name="export_jsonl"),
]
