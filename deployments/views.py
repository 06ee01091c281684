"""Change forms, the change page with live steps, approvals queue and decisions."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseStopPolling

from controlplane.accounts.decorators import role_required
from controlplane.accounts.roles import OPERATOR, VIEWER
from controlplane.audit.models import AuditEvent
from hosts import selectors as host_selectors
from hosts import services as host_services
from hosts.models import StateSnapshot

from . import policy, selectors, services
from .choices import FINAL_STATUSES, ChangeKind, ChangeStatus
from .forms import ChangeRequestForm, DecisionForm
from .models import ChangeRequest, Deployment, ModelArtifact


def _snapshot_context(host: Any, snapshot: StateSnapshot | None) -> dict[str, Any]:
    """The snapshot a decision is made on, and whether the rules let it back one."""
    refusal = None
    if snapshot is None:
        refusal = "This host has never been probed."
    else:
        try:
            host_services.snapshot_require_fresh(snapshot=snapshot, host=host)
        except host_services.SnapshotNotUsable as exc:
            refusal = exc.message
    return {
        "snapshot": snapshot,
        "summary": host_selectors.snapshot_summary(snapshot),
        "refusal": refusal,
        "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS,
    }


def _form_context(
    deployment: Deployment, kind: str, form: ChangeRequestForm, snapshot: StateSnapshot | None
) -> dict[str, Any]:
    context = _snapshot_context(deployment.host, snapshot)
    if "model" in form.fields:  # re-check the fit in place when another model is picked
        form.fields["model"].widget.attrs.update(
            {
                "hx-get": reverse("deployments:change_preflight", args=[deployment.pk, kind]),
                "hx-target": "#preflight",
                "hx-swap": "outerHTML",
            }
        )
    preflight = None
    target = None
    target_error = None
    model = None
    if kind == ChangeKind.MODEL_SWAP:
        model_id = form.data.get("model") if form.is_bound else None
        model = ModelArtifact.objects.filter(pk=model_id).first() if model_id else None
    try:
        target = services.change_target_for(
            deployment=deployment, kind=kind, model=model or deployment.model
        )
    except services.ChangeRefused as exc:
        target_error = exc.message
    if snapshot is not None and target is not None:
        preflight = services.change_preflight(
            deployment=deployment, target=target, snapshot=snapshot
        )
    because = (
        policy.approval_reasons(
            kind=kind,
            current_unit_text=target.current.unit_text,
            target_unit_text=target.unit_text if target.writes_unit else None,
        )
        if target is not None
        else []
    )
    context.update(
        deployment=deployment,
        host=deployment.host,
        kind=kind,
        kind_label=ChangeKind(kind).label,
        form=form,
        preflight=preflight,
        needs_approval=bool(because),
        approval_because=because,
        target=target,
        target_error=target_error,
        rollback_target=target.revision if target is not None else None,
        models=ModelArtifact.objects.all(),
    )
    return context


def _deployment(pk: int, kind: str) -> Deployment:
    if kind not in ChangeKind.values:
        raise Http404("unknown change kind")
    return get_object_or_404(
        Deployment.objects.select_related("host", "model", "current_revision"), pk=pk
    )


@role_required(OPERATOR)
def change_form(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    deployment = _deployment(pk, kind)
    snapshot = host_selectors.latest_snapshot(deployment.host)
    if request.method == "POST":
        form = ChangeRequestForm(request.POST, kind=kind)
        if form.is_valid():
            data = form.cleaned_data
            chosen = StateSnapshot.objects.filter(pk=data["snapshot_id"]).first()
            if chosen is None:
                form.add_error(None, "That snapshot does not exist.")
            else:
                try:
                    change = services.change_request_create(
                        user=request.user,
                        deployment=deployment,
                        kind=kind,
                        snapshot=chosen,
                        reason=data["reason"],
                        model=data.get("model"),
                        tensor_parallel_size=data.get("tensor_parallel_size"),
                        max_model_len=data.get("max_model_len"),
                        extra_args=data.get("extra_args"),
                        acknowledge_busy=data.get("acknowledge_busy", False),
                        benchmark=data.get("benchmark", False),
                    )
                except services.ChangeRefused as exc:
                    form.add_error(None, exc.message)
                    context = _form_context(deployment, kind, form, snapshot)
                    return render(
                        request,
                        "deployments/change_form.html",
                        context,
                        status=exc.http_status,
                    )
                messages.success(request, f"Change #{change.pk} requested.")
                return redirect("deployments:change", pk=change.pk)
        return render(
            request,
            "deployments/change_form.html",
            _form_context(deployment, kind, form, snapshot),
            status=400,
        )
    form = ChangeRequestForm(initial={"snapshot_id": snapshot.pk if snapshot else None}, kind=kind)
    return render(
        request, "deployments/change_form.html", _form_context(deployment, kind, form, snapshot)
    )


@role_required(OPERATOR)
def change_preflight(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    """Re-run the pre-flight checks for the model picked in the form (htmx)."""
    deployment = _deployment(pk, kind)
    snapshot = host_selectors.latest_snapshot(deployment.host)
    form = ChangeRequestForm(request.GET, kind=kind)
    return render(
        request,
        "deployments/change_form.html#preflight",
        _form_context(deployment, kind, form, snapshot),
    )


@role_required(VIEWER)
def change_detail(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        change = selectors.change_for_page(pk)
    except ChangeRequest.DoesNotExist as exc:
        raise Http404("no such change") from exc
    finished = change.status in FINAL_STATUSES
    context = {
        "change": change,
        "steps": change.steps.all(),
        "finished": finished,
        "approvals": change.approvals.select_related("snapshot"),
        "events": AuditEvent.objects.filter(correlation_id=change.correlation_id).order_by("seq")
        if change.correlation_id
        else [],
        "before": host_selectors.snapshot_summary(change.before_snapshot or change.snapshot),
        "after": host_selectors.snapshot_summary(change.after_snapshot),
        "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS,
    }
    if change.status == ChangeStatus.PENDING_APPROVAL:
        latest = host_selectors.latest_snapshot(change.host)
        context["review"] = _snapshot_context(change.host, latest)
        context["decision_form"] = DecisionForm(
            initial={"snapshot_id": getattr(latest, "pk", None)}
        )
    if request.htmx and request.GET.get("fragment") == "live":  # type: ignore[attr-defined]
        response = render(request, "deployments/change_detail.html#live", context)
        return HttpResponseStopPolling(response.content) if finished else response
    return render(request, "deployments/change_detail.html", context)


def _decide(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    change = get_object_or_404(ChangeRequest.objects.select_related("host"), pk=pk)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The form was not valid.")
        return redirect("deployments:change", pk=pk)
    reason = form.cleaned_data.get("reason") or ""
    snapshot = StateSnapshot.objects.filter(pk=form.cleaned_data.get("snapshot_id") or 0).first()
    try:
        if action in {"approve", "break_glass"} and snapshot is None:
            raise services.ChangeRefused(
                "Probe the host first: there is no snapshot to approve on.", code="stale"
            )
        if action == "approve":
            assert snapshot is not None
            change = services.change_request_approve(
                change=change, approver=request.user, snapshot=snapshot, reason=reason
            )
        elif action == "break_glass":
            assert snapshot is not None
            change = services.change_request_break_glass(
                change=change, admin=request.user, snapshot=snapshot, reason=reason
            )
        elif action == "reject":
            change = services.change_request_reject(
                change=change, approver=request.user, reason=reason
            )
        else:
            change = services.change_request_cancel(change=change, user=request.user)
    except services.ChangeRefused as exc:
        messages.error(request, exc.message)
        return redirect("deployments:change", pk=pk)
    if change.status == ChangeStatus.DRIFTED:
        messages.error(request, "The host changed since the request: it is marked drifted.")
    else:
        messages.success(request, f"Change #{change.pk}: {change.get_status_display()}.")
    return redirect("deployments:change", pk=pk)


@require_POST
@role_required(VIEWER)
def change_approve(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, "approve")


@require_POST
@role_required(VIEWER)
def change_reject(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, "reject")


@require_POST
@role_required(VIEWER)
def change_break_glass(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, "break_glass")


@require_POST
@role_required(VIEWER)
def change_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    return _decide(request, pk, "cancel")


@role_required(VIEWER)
def approvals(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "deployments/approvals.html",
        {"changes": selectors.approvals_waiting(), "ttl": settings.APPROVAL_TTL_SECONDS},
    )


@role_required(VIEWER)
def change_list(request: HttpRequest) -> HttpResponse:
    return render(request, "deployments/change_list.html", {"changes": selectors.recent_changes()})
