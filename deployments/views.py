"""Change forms, the change page with live steps, approvals queue and decisions. Thin: each
view parses, calls a service and renders what the services say (services.change_form)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST, require_safe
from django_htmx.http import HttpResponseStopPolling

from controlplane.accounts.decorators import role_required
from controlplane.accounts.roles import OPERATOR, VIEWER
from controlplane.audit.selectors import events_of_correlation
from hosts import selectors as host_selectors
from hosts.models import StateSnapshot
from hosts.scope import hosts_visible, rows_visible

from . import kinds, selectors, services
from .choices import FINAL_STATUSES, ChangeStatus
from .evaluation import comparison
from .evaluation import selectors as eval_selectors
from .forms import ChangeRequestForm, DecisionForm
from .models import ChangeRequest, Deployment
from .services import change_form as page
from .services import diagnostics


def _form_page(
    request: HttpRequest,
    deployment: Deployment,
    kind: str,
    form: ChangeRequestForm,
    snapshot: StateSnapshot | None,
    *,
    template: str = "deployments/change_form.html",
    status: int = 200,
    refusal: services.ChangeRefused | None = None,
) -> HttpResponse:
    arguments, field_error = form.preflight_arguments()
    facts = page.change_form_facts(
        deployment=deployment,
        kind=kind,
        snapshot=snapshot,
        arguments=arguments,
        field_error=field_error,
    )
    if refusal is not None:
        if not page.refusal_shown(facts, refusal):
            form.add_error(None, refusal.message)
        facts["not_requested"] = True
    return render(request, template, {**facts, "form": form}, status=status)


def _deployment(request: HttpRequest, pk: int, kind: str | None = None) -> Deployment:
    """The deployment if the user sees its host (one outside their scope is a 404, as one that
    does not exist); with a `kind`, the user must be able to request it there (403 naming the
    role and the host)."""
    if kind is not None and kind not in kinds.KINDS:
        raise Http404("unknown change kind")
    deployment = get_object_or_404(
        rows_visible(
            request.user, Deployment.objects.select_related("host", "model", "current_revision")
        ),
        pk=pk,
    )
    if kind is not None:
        services.change_request_create_allowed(user=request.user, host=deployment.host)
    return deployment


@require_http_methods(["GET", "HEAD", "POST"])
@role_required(OPERATOR)
def change_form(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    deployment = _deployment(request, pk, kind)
    snapshot = host_selectors.latest_snapshot(deployment.host)
    if request.method != "POST":
        initial: dict[str, object] = {"snapshot_id": snapshot.pk if snapshot else None}
        if "revision" in request.GET:  # "roll back here" on the revisions page
            initial["revision"] = request.GET["revision"]
        form = ChangeRequestForm(initial=initial, kind=kind, deployment=deployment)
        return _form_page(request, deployment, kind, form, snapshot)
    form = ChangeRequestForm(request.POST, kind=kind, deployment=deployment)
    if not form.is_valid():
        return _form_page(request, deployment, kind, form, snapshot, status=400)
    snapshots = rows_visible(request.user, StateSnapshot.objects.all())
    chosen = snapshots.filter(pk=form.cleaned_data["snapshot_id"]).first()
    if chosen is None:
        form.add_error(None, "That snapshot does not exist.")
        return _form_page(request, deployment, kind, form, snapshot, status=400)
    try:
        change = services.change_request_create(
            user=request.user,
            deployment=deployment,
            kind=kind,
            snapshot=chosen,
            **form.request_arguments(),
        )
    except services.ChangeRefused as exc:
        return _form_page(
            request, deployment, kind, form, snapshot, status=exc.http_status, refusal=exc
        )
    messages.success(request, f"Change #{change.pk} requested.")
    return redirect("deployments:change", pk=change.pk)


@require_POST
@role_required(OPERATOR)
def change_preflight(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    """Re-run the pre-flight checks on what the form says now (htmx, on every change to it), on
    the snapshot the form decides on (the host's latest if it names none of this host's).
    A POST, though it changes nothing: what is typed (engine arguments, environment) stays out
    of URLs, and so out of access logs and browser history."""
    deployment = _deployment(request, pk, kind)
    form = ChangeRequestForm(request.POST, kind=kind, deployment=deployment)
    named = request.POST.get("snapshot_id", "")
    snapshot = (
        StateSnapshot.objects.filter(pk=int(named), host=deployment.host).first()
        if named.isdigit() and len(named) < 19
        else None
    ) or host_selectors.latest_snapshot(deployment.host)
    return _form_page(
        request, deployment, kind, form, snapshot, template="deployments/change_form.html#preflight"
    )


@require_safe
@role_required(VIEWER)
def change_detail(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        change = selectors.change_for_page(pk, user=request.user)
    except ChangeRequest.DoesNotExist as exc:
        raise Http404("no such change") from exc
    finished = change.status in FINAL_STATUSES
    context = {
        "change": change,
        "steps": change.steps.all(),
        "finished": finished,
        "approvals": change.approvals.select_related("snapshot"),
        "events": events_of_correlation(change.correlation_id),
        "before": host_selectors.snapshot_summary(change.before_snapshot or change.snapshot),
        "after": host_selectors.snapshot_summary(change.after_snapshot),
        "failure": host_selectors.snapshot_summary(change.failure_snapshot),
        "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS,
        "evaluations": eval_selectors.change_evaluations(change.pk),
    }
    if change.status == ChangeStatus.PENDING_APPROVAL:
        review = page.change_review_facts(change)
        latest = review.pop("review_snapshot")
        initial = {"snapshot_id": getattr(latest, "pk", None)}
        context.update(review, decision_form=DecisionForm(initial=initial))
    if request.htmx and request.GET.get("fragment") == "live":  # type: ignore[attr-defined]
        response = render(request, "deployments/change_detail.html#live", context)
        return HttpResponseStopPolling(response.content) if finished else response
    return render(request, "deployments/change_detail.html", context)


@require_safe
@role_required(VIEWER)
def revisions(request: HttpRequest, pk: int) -> HttpResponse:
    """Every revision of a deployment side by side; `?a=1&b=3` diffs two unit files."""
    deployment = _deployment(request, pk)
    numbers = [_number(request.GET.get(key)) for key in ("a", "b")]
    found = comparison.revision_comparison(deployment, diff_from=numbers[0], diff_to=numbers[1])
    return render(
        request, "deployments/revisions.html", {"comparison": found, "host": deployment.host}
    )


def _number(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() and len(value) < 10 else None


def _decision(request: HttpRequest, pk: int) -> tuple[ChangeRequest, DecisionForm]:
    """The change, if the user sees its host (a 404 otherwise, as for a change that does not
    exist), and the decision's form. Each view asks its service's check first without the
    host (the role anywhere, before anything is read), then on the change's host (403)."""
    change = get_object_or_404(
        rows_visible(request.user, ChangeRequest.objects.select_related("host")), pk=pk
    )
    return change, DecisionForm(request.POST)


def _decision_snapshot(request: HttpRequest, form: DecisionForm) -> StateSnapshot:
    """The snapshot an approval rests on (the form names it; one of a host outside the user's
    scope names none), or a refusal to probe first."""
    snapshots = rows_visible(request.user, StateSnapshot.objects.all())
    snapshot = snapshots.filter(pk=form.cleaned_data.get("snapshot_id") or 0).first()
    if snapshot is None:
        raise services.ChangeRefused(
            "Probe the host first: there is no snapshot to approve on.", code="stale"
        )
    return snapshot


def _decided(request: HttpRequest, pk: int, decide: Callable[[], ChangeRequest]) -> HttpResponse:
    """Run `decide()` (one service call) and say on the change page what became of it. A
    forbidden decision is a 403 page with the rule's words (RefusalMiddleware)."""
    try:
        change = decide()
    except services.ChangeRefused as exc:
        if exc.code in ("forbidden", "not_found"):
            raise
        messages.error(request, exc.message)
        return redirect("deployments:change", pk=pk)
    if change.status == ChangeStatus.DRIFTED:
        messages.error(request, "The host changed since the request: it is marked drifted.")
    else:
        messages.success(request, f"Change #{change.pk}: {change.get_status_display()}.")
    return redirect("deployments:change", pk=pk)


def _invalid(request: HttpRequest, pk: int) -> HttpResponse:
    messages.error(request, "The form was not valid.")
    return redirect("deployments:change", pk=pk)


@require_POST
@role_required(VIEWER)
def change_approve(request: HttpRequest, pk: int) -> HttpResponse:
    services.change_request_approve_allowed(user=request.user)
    change, form = _decision(request, pk)
    services.change_request_approve_allowed(user=request.user, host=change.host)
    if not form.is_valid():
        return _invalid(request, pk)

    def decide() -> ChangeRequest:
        return services.change_request_approve(
            change=change,
            approver=request.user,
            snapshot=_decision_snapshot(request, form),
            reason=form.cleaned_data.get("reason") or "",
        )

    return _decided(request, pk, decide)


@require_POST
@role_required(VIEWER)
def change_reject(request: HttpRequest, pk: int) -> HttpResponse:
    services.change_request_reject_allowed(user=request.user)
    change, form = _decision(request, pk)
    services.change_request_reject_allowed(user=request.user, host=change.host)
    if not form.is_valid():
        return _invalid(request, pk)

    def decide() -> ChangeRequest:
        reason = form.cleaned_data.get("reason") or ""
        return services.change_request_reject(change=change, approver=request.user, reason=reason)

    return _decided(request, pk, decide)


@require_POST
@role_required(VIEWER)
def change_break_glass(request: HttpRequest, pk: int) -> HttpResponse:
    services.change_request_break_glass_allowed(user=request.user)
    change, form = _decision(request, pk)
    services.change_request_break_glass_allowed(user=request.user, host=change.host)
    if not form.is_valid():
        return _invalid(request, pk)

    def decide() -> ChangeRequest:
        return services.change_request_break_glass(
            change=change,
            admin=request.user,
            snapshot=_decision_snapshot(request, form),
            reason=form.cleaned_data.get("reason") or "",
        )

    return _decided(request, pk, decide)


@require_POST
@role_required(VIEWER)
def change_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    change, form = _decision(request, pk)
    services.change_request_cancel_allowed(change=change, user=request.user)
    if not form.is_valid():
        return _invalid(request, pk)

    def decide() -> ChangeRequest:
        return services.change_request_cancel(change=change, user=request.user)

    return _decided(request, pk, decide)


@require_safe
@role_required(VIEWER)
def approvals(request: HttpRequest) -> HttpResponse:
    page, page_note = selectors.approvals_page(user=request.user, page=request.GET.get("page"))
    return render(
        request,
        "deployments/approvals.html",
        {"page": page, "page_note": page_note, "ttl": settings.APPROVAL_TTL_SECONDS},
    )


@require_safe
@role_required(VIEWER)
def change_list(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "deployments/change_list.html",
        {"changes": selectors.recent_changes(user=request.user)},
    )


@require_POST
@role_required(OPERATOR)
def gpu_diagnostic(request: HttpRequest, name: str) -> HttpResponse:
    """Queue DCGM's diagnostic on a host (the level from the form); back to the host page."""
    host = get_object_or_404(hosts_visible(request.user), name=name)
    level = request.POST.get("level", "")
    try:
        diagnostics.gpu_diagnostic_request(
            host=host, level=int(level) if level.isdigit() else -1, user=request.user
        )
    except services.ChangeRefused as exc:
        if exc.code in ("forbidden", "not_found"):
            raise
        messages.error(request, exc.message)
    else:
        messages.success(request, f"GPU diagnostic level {level} queued on {host.name}.")
    return redirect("hosts:detail", name=host.name)
