"""Hosts and snapshots, in the `api` namespace."""

from django.urls import URLPattern, path

from controlplane.api.views.base import endpoint

from . import journal, maintenance, snapshot_diff, views

urlpatterns: list[URLPattern] = [
    path("hosts/", endpoint(views.HostList), name="host-list"),
    path("hosts/<str:name>/", endpoint(views.HostDetail), name="host-detail"),
    path("hosts/<str:name>/snapshots/", endpoint(views.HostSnapshots), name="host-snapshots"),
    path(
        "hosts/<str:name>/snapshots/latest/",
        endpoint(views.HostSnapshotLatest),
        name="host-snapshot-latest",
    ),
    path(
        "hosts/<str:name>/maintenance/",
        endpoint(maintenance.HostMaintenance),
        name="host-maintenance",
    ),
    path("snapshots/<int:pk>/", endpoint(views.SnapshotDetail), name="snapshot-detail"),
    path(
        "hosts/<str:name>/units/<str:unit>/journal/",
        endpoint(journal.HostUnitJournal),
        name="host-unit-journal",
    ),
    path(
        "snapshots/<int:pk>/diff/<int:other>/",
        endpoint(snapshot_diff.SnapshotDiff),
        name="snapshot-diff",
    ),
]
