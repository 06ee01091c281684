"""Fleet dashboard, host page, snapshot page; "Probe now" and host-key acceptance."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseStopPolling

from controlplane.accounts.decorators import role_required, superuser_required
from controlplane.accounts.roles import APPROVER, OPERATOR, VIEWER, has_role
from controlplane.audit import selectors as audit_selectors

from . import charts, selectors, services
from .choices import HostKeyStatus
from .models import Host, StateSnapshot


def _is_partial(request: HttpRequest) -> bool:
    return bool(request.htmx and not request.htmx.boosted)  # type: ignore[attr-defined]


def _row_context(
    host: Host, snapshot: StateSnapshot | None, probing: bool = False
) -> dict[str, Any]:
    return {
        "host": host,
        "snapshot": snapshot,
        "summary": selectors.snapshot_summary(snapshot),
        "probing": probing,
        "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS,
    }


@role_required(VIEWER)
def dashboard(request: HttpRequest) -> HttpResponse:
    rows = [_row_context(h, s) for h, s in selectors.hosts_with_latest_snapshot()]
    return render(
        request,
        "hosts/dashboard.html",
        {"rows": rows, "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS},
    )


@role_required(VIEWER)
def dashboard_rows(request: HttpRequest) -> HttpResponse:
    rows = [_row_context(h, s) for h, s in selectors.hosts_with_latest_snapshot()]
    return render(request, "hosts/dashboard.html#rows", {"rows": rows})


@role_required(VIEWER)
def host_detail(request: HttpRequest, name: str) -> HttpResponse:
    host = get_object_or_404(Host.objects.select_related("credential"), name=name)
    snapshot = selectors.latest_snapshot(host)
    context = _row_context(host, snapshot)
    context.update(
        history=selectors.snapshot_history(host),
        deployments=host.deployments.select_related("model", "current_revision"),
        changes=host.changes.select_related("deployment").order_by("-created_at")[:10],
        chart=charts.gpu_chart(selectors.gpu_series(host)),
        integrity_snapshot=host.snapshots.filter(includes_integrity=True).first(),
        timeline_events=audit_selectors.host_timeline(host.pk),
    )
    return render(request, "hosts/host_detail.html", context)


@require_POST
@role_required(VIEWER)
def probe_now(request: HttpRequest, name: str) -> HttpResponse:
    # Probing is read-only: operators probe before they request, approvers before they approve.
    if not (has_role(request.user, OPERATOR) or has_role(request.user, APPROVER)):
        raise PermissionDenied("Probing needs the operator or approver role.")
    host = get_object_or_404(Host, name=name)
    integrity = request.POST.get("integrity") == "1"
    previous = selectors.latest_snapshot(host)
    try:
        services.probe_enqueue(host=host, user=request.user, integrity=integrity)
    except services.QueueUnavailable as exc:
        if _is_partial(request):
            return HttpResponse(f'<span class="error">{exc}</span>', status=503)
        messages.error(request, str(exc))
        return redirect("hosts:detail", name=host.name)
    if not _is_partial(request):
        messages.success(request, f"Probe of {host.name} queued.")
        return redirect("hosts:detail", name=host.name)
    return _probe_fragment(request, host, previous, probing=True)


@role_required(VIEWER)
def probe_status(request: HttpRequest, name: str) -> HttpResponse:
    """Polled while a probe runs; answers 286 (stop polling) with fresh content when done."""
    host = get_object_or_404(Host, name=name)
    after = request.GET.get("after", "")
    latest = selectors.latest_snapshot(host)
    done = latest is not None and (not after.isdigit() or latest.pk > int(after))
    response = _probe_fragment(request, host, latest, probing=not done)
    if done:
        stop = HttpResponseStopPolling(response.content)
        return stop
    return response


def _probe_fragment(
    request: HttpRequest, host: Host, snapshot: StateSnapshot | None, *, probing: bool
) -> HttpResponse:
    template = (
        "hosts/dashboard.html#row"
        if request.GET.get("view", request.POST.get("view")) == "row"
        else "hosts/host_detail.html#summary"
    )
    context = _row_context(host, snapshot, probing=probing)
    context["view"] = "row" if template.endswith("#row") else "detail"
    return render(request, template, context)


@require_POST
@superuser_required
def accept_host_key(request: HttpRequest, name: str) -> HttpResponse:
    host = get_object_or_404(Host, name=name)
    presented = request.POST.get("fingerprint", "")
    if not host.presented_host_key or presented != host.presented_key_fingerprint:
        messages.error(
            request, "The presented key changed since the page was loaded; review it again."
        )
        return redirect("hosts:detail", name=host.name)
    try:
        services.host_key_accept(
            host=host,
            key=host.presented_host_key,
            actor=request.user,
            reason=request.POST.get("reason", ""),
        )
    except ValidationError as exc:
        messages.error(request, exc.messages[0])
        return redirect("hosts:detail", name=host.name)
    messages.success(request, f"Pinned host key {presented} for {host.name}.")
    return redirect("hosts:detail", name=host.name)


@role_required(VIEWER)
def snapshot_detail(request: HttpRequest, pk: int) -> HttpResponse:
    snapshot = get_object_or_404(StateSnapshot.objects.select_related("host"), pk=pk)
    return render(
        request,
        "hosts/snapshot_detail.html",
        {
            "snapshot": snapshot,
            "summary": selectors.snapshot_summary(snapshot),
            "fingerprint": snapshot.material_fingerprint(),
            "sections": sorted(snapshot.raw.items()),
            "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS,
            "host_key_changed": snapshot.host.host_key_status == HostKeyStatus.CHANGED,
        },
    )
