"""Fleet dashboard, host page, snapshot page; "Probe now" and host-key acceptance."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe
from django_htmx.http import HttpResponseStopPolling

from controlplane.accounts.decorators import role_required
from controlplane.accounts.roles import VIEWER
from controlplane.audit import selectors as audit_selectors
from controlplane.htmx import is_partial

from . import charts, selectors, services
from .choices import HostKeyStatus
from .forms import FleetFilterForm
from .models import Host, StateSnapshot
from .scope import host_groups_of, host_groups_shown, hosts_visible, rows_visible

# What the host page's audit timeline shows of each event (audit/partials/host_timeline.html).
TIMELINE_SHOWN = ("seq", "created_at", "actor", "action", "target_label", "snapshot_id", "host_id")


def _host(request: HttpRequest, name: str, hosts: QuerySet[Host] | None = None) -> Host:
    """The host named `name` if the user sees it: one outside their scope is a 404, exactly
    as one that does not exist."""
    return get_object_or_404(hosts_visible(request.user, hosts), name=name)


def _row_context(
    host: Host, snapshot: StateSnapshot | None, probing: bool = False
) -> dict[str, Any]:
    return {
        "host": host,
        "snapshot": snapshot,
        "summary": selectors.snapshot_summary(snapshot),
        "snapshot_error": selectors.snapshot_shown_error(snapshot),
        "probing": probing,
        "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS,
    }


def _fleet_context(request: HttpRequest, *, whole_page: bool) -> dict[str, Any]:
    """The fleet page's context; the rows alone (the htmx refresh every 15 s, the most
    frequent request there is) do without the verdict counts above the table."""
    form = FleetFilterForm(request.GET)
    form.is_valid()  # a filter that does not parse is left out; the others still apply
    filters = form.cleaned_data
    page, rows, page_note = selectors.fleet_page(
        user=request.user,
        verdict=filters.get("verdict") or "",
        q=filters.get("q") or "",
        group=filters.get("group") or "",
        sort=filters.get("sort") or "verdict",
        page=request.GET.get("page"),
        maintenance=filters.get("maintenance") or "",
    )
    query = request.GET.copy()
    query.pop("page", None)
    counts = selectors.fleet_counts(user=request.user) if whole_page else None
    return {
        "form": form,
        "page": page,
        "page_note": page_note,
        "rows": rows,
        "query": query.urlencode(),
        "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS,
        "verdicts": counts.verdicts if counts else {},
        "groups": host_groups_shown(user=request.user) if whole_page else [],
        "in_maintenance": counts.in_maintenance if counts else 0,
    }


@require_safe
@role_required(VIEWER)
def dashboard(request: HttpRequest) -> HttpResponse:
    if is_partial(request):
        return render(
            request, "hosts/dashboard.html#rows", _fleet_context(request, whole_page=False)
        )
    return render(request, "hosts/dashboard.html", _fleet_context(request, whole_page=True))


@require_safe
@role_required(VIEWER)
def dashboard_rows(request: HttpRequest) -> HttpResponse:
    return render(request, "hosts/dashboard.html#rows", _fleet_context(request, whole_page=False))


@require_safe
@role_required(VIEWER)
def host_detail(request: HttpRequest, name: str) -> HttpResponse:
    host = _host(request, name, Host.objects.select_related("credential", "health"))
    snapshot = selectors.latest_snapshot(host)
    context = _row_context(host, snapshot)
    history = selectors.snapshot_history(host)
    timeline = audit_selectors.host_timeline(host.pk)
    context.update(
        health=getattr(host, "health", None),
        history=history,
        history_key=selectors.fragment_key(history, selectors.HISTORY_SHOWN),
        parity=selectors.host_parity(snapshot),
        deployments=host.deployments.select_related("model", "current_revision"),
        changes=host.changes.select_related("deployment").order_by("-created_at")[:10],
        integrity_snapshot=selectors.latest_integrity_snapshot(host),
        diagnostic=selectors.gpu_diagnostic_shown(host),
        timeline_events=timeline,
        timeline_key=selectors.fragment_key(timeline, TIMELINE_SHOWN),
        groups=host_groups_of(host),
    )
    return render(request, "hosts/host_detail.html", context)


@require_safe
@role_required(VIEWER)
def unit_journal(request: HttpRequest, name: str, unit: str) -> HttpResponse:
    """The newest lines of a unit's journal, read on demand over SSH (read-only, audited)."""
    host = _host(request, name)
    try:
        lines = services.host_journal(host=host, unit=unit, user=request.user)
        error = ""
    except services.HostRefused as exc:
        if exc.code == "forbidden":
            raise
        lines, error = [], exc.message
    context = {"host": host, "unit": unit, "lines": lines, "error": error}
    return render(request, "hosts/partials/journal.html", context)


@require_POST
@role_required(VIEWER)
def probe_now(request: HttpRequest, name: str) -> HttpResponse:
    services.require_probe_permission(request.user)  # the first gate, before any input
    host = _host(request, name)
    integrity = request.POST.get("integrity") == "1"
    previous = selectors.latest_snapshot(host)
    try:
        services.probe_enqueue(host=host, user=request.user, integrity=integrity)
    except services.QueueUnavailable as exc:
        if is_partial(request):
            return HttpResponse(f'<span class="error">{exc}</span>', status=503)
        messages.error(request, str(exc))
        return redirect("hosts:detail", name=host.name)
    if not is_partial(request):
        messages.success(request, f"Probe of {host.name} queued.")
        return redirect("hosts:detail", name=host.name)
    return _probe_fragment(request, host, previous, probing=True)


@require_safe
@role_required(VIEWER)
def probe_status(request: HttpRequest, name: str) -> HttpResponse:
    """Polled while a probe runs; answers 286 (stop polling) with fresh content when done."""
    host = _host(request, name)
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
    context["row"] = selectors.fleet_row(Host.objects.select_related("health").get(pk=host.pk))
    if template.endswith("#summary") and not probing:
        # The probe may have checked the engine's files too: refresh that section in place.
        context.update(integrity_snapshot=selectors.latest_integrity_snapshot(host), oob=True)
        summary = render(request, template, context).content
        integrity = render(request, "hosts/host_detail.html#integrity", context).content
        return HttpResponse(summary + integrity)
    return render(request, template, context)


@require_POST
@role_required(VIEWER)
def accept_host_key(request: HttpRequest, name: str) -> HttpResponse:
    host = _host(request, name)
    try:
        host = services.host_key_accept(
            host=host,
            actor=request.user,
            reason=request.POST.get("reason", ""),
            reviewed_fingerprint=request.POST.get("fingerprint", ""),
        )
    except services.HostRefused as exc:
        if exc.code == "forbidden":
            raise
        messages.error(request, exc.message)
        return redirect("hosts:detail", name=host.name)
    messages.success(request, f"Pinned host key {host.host_key_fingerprint} for {host.name}.")
    return redirect("hosts:detail", name=host.name)


@require_safe
@role_required(VIEWER)
def snapshot_detail(request: HttpRequest, pk: int) -> HttpResponse:
    snapshot = get_object_or_404(
        rows_visible(request.user, StateSnapshot.objects.select_related("host")), pk=pk
    )
    return render(
        request,
        "hosts/snapshot_detail.html",
        {
            "snapshot": snapshot,
            "summary": selectors.snapshot_summary(snapshot),
            "fingerprint": snapshot.material_fingerprint(),
            "shown": selectors.snapshot_shown(snapshot),
            "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS,
            "host_key_changed": snapshot.host.host_key_status == HostKeyStatus.CHANGED,
        },
    )


@require_safe
@role_required(VIEWER)
def gpu_series(request: HttpRequest, name: str) -> HttpResponse:
    """Per-GPU history for the host page's charts (static/js/gpu-charts.js fetches it)."""
    host = _host(request, name)
    try:
        data = charts.gpu_chart_series(host, request.GET.get("window", charts.DEFAULT_WINDOW))
    except charts.UnknownWindow as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse(data)
