"""Change forms, the change page with live steps, approvals queue and decisions."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST, require_safe
from django_htmx.http import HttpResponseStopPolling

from controlplane.accounts.decorators import role_required
from controlplane.accounts.roles import OPERATOR, VIEWER
from controlplane.audit.models import AuditEvent
from hosts import selectors as host_selectors
from hosts import services as host_services
from hosts.choices import SnapshotStatus
from hosts.models import StateSnapshot

from . import kinds, selectors, services
from .choices import FINAL_STATUSES, ChangeStatus
from .evaluation import comparison
from .evaluation import selectors as eval_selectors
from .forms import ChangeRequestForm, DecisionForm
from .models import ChangeRequest, Deployment, ModelArtifact


def _snapshot_context(
    host: Any, snapshot: StateSnapshot | None, *, allow_partial: bool = False
) -> dict[str, Any]:
    """The snapshot a decision is made on, and whether the rules let it back one (the view
    mirrors hosts.services.snapshot_require_fresh; the service decides)."""
    refusal = None
    if snapshot is None:
        refusal = "This host has never been probed."
    else:
        try:
            host_services.snapshot_require_fresh(
                snapshot=snapshot, host=host, allow_partial=allow_partial
            )
        except host_services.SnapshotNotUsable as exc:
            refusal = exc.message
    partial = snapshot is not None and snapshot.status == SnapshotStatus.PARTIAL
    return {
        "snapshot": snapshot,
        "summary": host_selectors.snapshot_summary(snapshot),
        "refusal": refusal,
        "unknown": host_services.unknown_facts(snapshot) if snapshot and partial else [],
        "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS,
    }


# The form's fields the pre-flight weighs, as the request does (deployments.services
# .change_check); the others (the reason, the benchmark) do not change it.
PREFLIGHT_FIELDS = (
    "model",
    "tensor_parallel_size",
    "max_model_len",
    "extra_args",
    "environment",
    "acknowledge_busy",
    "acknowledge_integrity",
)


def _preflight_arguments(form: ChangeRequestForm) -> tuple[dict[str, Any], str | None]:
    """The pre-flight's arguments as the form parses them, or the first field's error: what is
    typed so far, whether or not the rest of the form (the reason) is filled in yet."""
    if not form.is_bound:
        return {}, None
    form.is_valid()
    arguments: dict[str, Any] = {}
    for name in PREFLIGHT_FIELDS:
        if name not in form.fields:
            continue
        if name in form.errors and form.data.get(name) not in (None, ""):
            label = form.fields[name].label or name.replace("_", " ")
            return {}, f"{label}: {' '.join(str(e) for e in form.errors[name])}"
        value = form.cleaned_data.get(name)
        if value not in (None, ""):
            arguments[name] = value
    return arguments, None


def _form_context(
    deployment: Deployment, kind: str, form: ChangeRequestForm, snapshot: StateSnapshot | None
) -> dict[str, Any]:
    declared = kinds.spec(kind)
    context = _snapshot_context(
        deployment.host, snapshot, allow_partial=declared.partial_snapshot_ok
    )
    arguments, field_error = _preflight_arguments(form)
    model = arguments.get("model") if declared.takes_model else None
    check = services.ChangeCheck(target_error=field_error)
    # A swap's pre-flight is about the model it swaps to: none until one is picked.
    if field_error is None and (not declared.takes_model or model is not None):
        check = services.change_check(
            deployment=deployment, kind=kind, snapshot=snapshot, **arguments
        )
    target = check.target
    context.update(
        deployment=deployment,
        host=deployment.host,
        kind=kind,
        kind_label=declared.label,
        kind_spec=declared,
        form=form,
        preflight=check.preflight,
        pick_model=declared.takes_model and model is None and field_error is None,
        needs_approval=bool(check.approval_because),
        approval_because=check.approval_because,
        target=target,
        target_error=check.target_error,
        rollback_target=target.revision if target is not None else None,
        models=ModelArtifact.objects.all(),
    )
    return context


def _shown_already(context: dict[str, Any], refusal: services.ChangeRefused) -> bool:
    """A refusal the page already shows (the snapshot card, the pre-flight card, or the
    acknowledgement the pre-flight asks for) is not repeated above the form."""
    if refusal.details.get("needs_acknowledgement") or refusal.details.get(
        "needs_integrity_acknowledgement"
    ):
        return context.get("preflight") is not None
    shown = [context.get("target_error"), context.get("refusal")]
    preflight = context.get("preflight")
    if preflight is not None:
        shown += [*preflight.problems, "; ".join(preflight.problems)]
    return refusal.message in shown


def _deployment(pk: int, kind: str) -> Deployment:
    if kind not in kinds.KINDS:
        raise Http404("unknown change kind")
    return get_object_or_404(
        Deployment.objects.select_related("host", "model", "current_revision"), pk=pk
    )


@require_http_methods(["GET", "HEAD", "POST"])
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
                        environment=data.get("environment"),
                        acknowledge_busy=data.get("acknowledge_busy", False),
                        acknowledge_unknown=data.get("acknowledge_unknown", False),
                        acknowledge_integrity=data.get("acknowledge_integrity", False),
                        benchmark_profile=data.get("benchmark_profile"),
                    )
                except services.ChangeRefused as exc:
                    context = _form_context(deployment, kind, form, snapshot)
                    if not _shown_already(context, exc):
                        form.add_error(None, exc.message)
                    context["not_requested"] = True
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


@require_POST
@role_required(OPERATOR)
def change_preflight(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    """Re-run the pre-flight checks on what the form says now (htmx, on every change to it), on
    the snapshot the form decides on (the host's latest if it names none of this host's).
    A POST, though it changes nothing: what is typed (engine arguments, environment) stays out
    of URLs, and so out of access logs and browser history."""
    deployment = _deployment(pk, kind)
    form = ChangeRequestForm(request.POST, kind=kind)
    named = request.POST.get("snapshot_id", "")
    snapshot = (
        StateSnapshot.objects.filter(pk=int(named), host=deployment.host).first()
        if named.isdigit() and len(named) < 19
        else None
    ) or host_selectors.latest_snapshot(deployment.host)
    return render(
        request,
        "deployments/change_form.html#preflight",
        _form_context(deployment, kind, form, snapshot),
    )


@require_safe
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
        "failure": host_selectors.snapshot_summary(change.failure_snapshot),
        "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS,
        "evaluations": eval_selectors.change_evaluations(change.pk),
    }
    if change.status == ChangeStatus.PENDING_APPROVAL:
        context.update(_review_context(change))
    if request.htmx and request.GET.get("fragment") == "live":  # type: ignore[attr-defined]
        response = render(request, "deployments/change_detail.html#live", context)
        return HttpResponseStopPolling(response.content) if finished else response
    return render(request, "deployments/change_detail.html", context)


def _review_context(change: ChangeRequest) -> dict[str, Any]:
    """What the approver decides on: the latest snapshot, the pre-flight re-checked on it, and
    the unit file the change would write, as a diff against the one serving."""
    latest = host_selectors.latest_snapshot(change.host)
    review = _snapshot_context(change.host, latest, allow_partial=change.rests_on_partial)
    if latest is not None:
        review["preflight"] = services.change_review(change=change, snapshot=latest)
    source, target = change.from_revision, change.target_revision
    return {
        "review": review,
        "decision_form": DecisionForm(initial={"snapshot_id": getattr(latest, "pk", None)}),
        "unit_diff": comparison.unit_diff(source, target) if source and target else [],
        "unit_review": comparison.unit_review(source, target) if source and target else [],
    }


@require_safe
@role_required(VIEWER)
def revisions(request: HttpRequest, pk: int) -> HttpResponse:
    """Every revision of a deployment side by side; `?a=1&b=3` diffs two unit files."""
    deployment = get_object_or_404(
        Deployment.objects.select_related("host", "model", "current_revision"), pk=pk
    )
    numbers = [_number(request.GET.get(key)) for key in ("a", "b")]
    found = comparison.revision_comparison(deployment, diff_from=numbers[0], diff_to=numbers[1])
    return render(
        request, "deployments/revisions.html", {"comparison": found, "host": deployment.host}
    )


def _number(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() and len(value) < 10 else None


# Who may decide at all, asked before the form is read: a 403 page with the rule's words.
_ALLOWED = {
    "approve": lambda user, change: services.change_request_approve_allowed(user=user),
    "reject": lambda user, change: services.change_request_reject_allowed(user=user),
    "break_glass": lambda user, change: services.change_request_break_glass_allowed(user=user),
    "cancel": lambda user, change: services.change_request_cancel_allowed(change=change, user=user),
}


def _decide(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    change = get_object_or_404(ChangeRequest.objects.select_related("host"), pk=pk)
    _ALLOWED[action](request.user, change)  # a ChangeRefused becomes 403 (RefusalMiddleware)
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
        if exc.code == "forbidden":
            raise  # a 403 page with the rule's words (RefusalMiddleware), not a note on the change
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


@require_safe
@role_required(VIEWER)
def approvals(request: HttpRequest) -> HttpResponse:
    page, page_note = selectors.approvals_page(page=request.GET.get("page"))
    return render(
        request,
        "deployments/approvals.html",
        {"page": page, "page_note": page_note, "ttl": settings.APPROVAL_TTL_SECONDS},
    )


@require_safe
@role_required(VIEWER)
def change_list(request: HttpRequest) -> HttpResponse:
    return render(request, "deployments/change_list.html", {"changes": selectors.recent_changes()})
