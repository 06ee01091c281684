"""Hosts and snapshots: list and read them, and take a snapshot now."""

from __future__ import annotations

import re
from typing import Any

from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.accounts.models import validate_host_group_name
from controlplane.api.errors import RefusalSerializer
from controlplane.api.pagination import NamePagination, SnapshotPagination
from controlplane.api.permissions import PROBE
from controlplane.api.views.base import APIView, row_or_404
from hosts import selectors as host_selectors
from hosts import services as host_services
from hosts.models import Host, StateSnapshot
from hosts.scope import hosts_visible, rows_visible
from hosts.validators import HOST_NAME_RE

from . import selectors
from .serializers import (
    HostSerializer,
    ProbeQuerySerializer,
    ProbeQueuedSerializer,
    SnapshotDetailSerializer,
    SnapshotSerializer,
)

_HOST_NAME = re.compile(HOST_NAME_RE)


def host_or_404(request: Request, name: str) -> Host:
    """The host named `name` if the caller sees it: one outside their scope answers exactly
    what a host that does not exist answers."""
    # Names are validated at creation, so one that breaks the pattern names no host; checking
    # first also keeps odd bytes (NUL, say) away from the database.
    if not _HOST_NAME.fullmatch(name):
        raise exceptions.NotFound("No such host.")
    hosts = hosts_visible(request.user, Host.objects.select_related("credential"))
    host = hosts.filter(name=name).first()
    if host is None:
        raise exceptions.NotFound("No such host.")
    return host


class HostFilter(serializers.Serializer):
    group = serializers.CharField(
        required=False,
        max_length=63,
        validators=[validate_host_group_name],
        help_text="Only the hosts of this host group (by name).",
    )


class HostList(APIView):
    serializer_class = HostSerializer
    pagination_class = NamePagination

    def get_queryset(self) -> QuerySet[Host]:
        filters = HostFilter(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return selectors.hosts_with_latest_snapshot_id(
            user=self.request.user, group=filters.validated_data.get("group", "")
        )

    @extend_schema(
        operation_id="hosts_list",
        summary="The hosts you see, by name, with their groups and latest snapshot",
        parameters=[HostFilter],
        responses=HostSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        latest = selectors.snapshots_by_id(
            [h.latest_snapshot_id for h in page if h.latest_snapshot_id]
        )
        for host in page:
            host.latest_snapshot = latest.get(host.latest_snapshot_id)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class HostDetail(APIView):
    serializer_class = HostSerializer

    @extend_schema(operation_id="hosts_retrieve", summary="One host")
    def get(self, request: Request, name: str) -> Response:
        return Response(self.get_serializer(host_or_404(request, name)).data)


class HostSnapshots(APIView):
    serializer_class = SnapshotSerializer
    pagination_class = SnapshotPagination
    required_roles = {"POST": PROBE}

    def get_queryset(self) -> QuerySet[StateSnapshot]:
        return host_or_404(self.request, self.kwargs["name"]).snapshots.select_related("host")

    @extend_schema(
        operation_id="hosts_snapshots_list",
        summary="A host's snapshots, newest first",
        responses=SnapshotSerializer(many=True),
    )
    def get(self, request: Request, name: str) -> Response:
        return self.page_response(self.get_queryset())

    @extend_schema(
        operation_id="hosts_snapshots_create",
        summary="Probe the host now",
        description="Takes a snapshot synchronously (201, the snapshot), or with `async=1` "
        "queues the probe for a worker (202). Needs the operator or approver role on the host.",
        request=None,
        parameters=[ProbeQuerySerializer],
        responses={
            201: SnapshotDetailSerializer,
            202: ProbeQueuedSerializer,
            503: OpenApiResponse(RefusalSerializer, description="The task queue is down."),
        },
    )
    def post(self, request: Request, name: str) -> Response:
        host = host_or_404(request, name)
        query = ProbeQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        integrity: bool = query.validated_data["integrity"]
        latest_url = reverse("api:host-snapshot-latest", args=[host.name])
        if query.validated_data["async"]:
            host_services.probe_enqueue(host=host, user=request.user, integrity=integrity)
            return Response(
                {
                    "detail": f"Probe of {host.name} queued.",
                    "host": host.name,
                    "latest": latest_url,
                },
                status=status.HTTP_202_ACCEPTED,
            )
        # Like "Probe now": the integrity check runs when asked for, or when it is due.
        snapshot = host_services.host_probe_now(
            host=host, user=request.user, integrity=integrity or None
        )
        return Response(
            SnapshotDetailSerializer(snapshot).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": reverse("api:snapshot-detail", args=[snapshot.pk])},
        )


class HostSnapshotLatest(APIView):
    serializer_class = SnapshotDetailSerializer

    @extend_schema(operation_id="hosts_snapshots_latest", summary="A host's newest snapshot")
    def get(self, request: Request, name: str) -> Response:
        snapshot = host_selectors.latest_snapshot(host_or_404(request, name))
        if snapshot is None:
            raise exceptions.NotFound("This host has never been probed.")
        return Response(self.get_serializer(snapshot).data)


class SnapshotDetail(APIView):
    serializer_class = SnapshotDetailSerializer

    @extend_schema(operation_id="snapshots_retrieve", summary="One snapshot, with raw output")
    def get(self, request: Request, pk: int) -> Response:
        snapshots = rows_visible(request.user, StateSnapshot.objects.select_related("host"))
        snapshot: Any = row_or_404(snapshots, pk, "snapshot")
        return Response(self.get_serializer(snapshot).data)
