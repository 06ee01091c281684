"""The audit log, in the `api` namespace."""

from django.urls import URLPattern, path

from controlplane.api.views.base import endpoint

from . import verify, views

urlpatterns: list[URLPattern] = [
    path("audit/events/", endpoint(views.AuditEventList), name="audit-event-list"),
    path("audit/events/<int:seq>/", endpoint(views.AuditEventDetail), name="audit-event-detail"),
    path("audit/export/", endpoint(views.AuditExport), name="audit-export"),
    path("audit/verify/", endpoint(verify.AuditVerify), name="audit-verify"),
]
