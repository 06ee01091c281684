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
from controlplane.htmx import is_partial
from hosts import selectors as host_selectors
from hosts import services as host_services
from hosts.models import StateSnapshot
from hosts.scope import hosts_visible, rows_visible

from . import kinds, selectors, services
from .choices import FINAL_STATUSES, ChangeStatus
from .evaluation import comparison
from .evaluation import selectors as eval_selectors
from .forms import ChangeRequestForm, DecisionForm
from .models import ChangeRequest, Deployment
from .rollouts import selectors as rollout_selectors
from .services import change_form as page
from .services import diagnostics


def _form_context(
    deployment: Deployment,
    kind: str,
    form: ChangeRequestForm,
    snapshot: StateSnapshot | None,
    refusal: services.ChangeRefused | None = None,
) -> dict[str, object]:
    arguments, field_error = form.preflight_arguments()
    facts = page.change_form_facts(
        deployment=deployment,
        kind=kind,
        snapshot=snapshot,
        arguments=arguments,
        field_error=field_error,
    )
    if refusal is not None:
        if refusal.shown_in == "reason":  # beside what was typed
            form.add_error("reason", refusal.message)
        elif not page.refusal_shown(facts, refusal):
            form.add_error(None, refusal.message)
        facts["not_requested"] = True
    # Each acknowledgement that applies, with its checkbox as the form holds it.
    acknowledgements = [a for a in facts["acknowledgements"] if a.field in form.fields]
    facts["acknowledgement_fields"] = [(a, form[a.field]) for a in acknowledgements]
    facts["acknowledgement_names"] = [
        name for name in form.fields if name.startswith("acknowledge_")
    ]
    return {**facts, "form": form}


def _form_page(
    request: HttpRequest,
    deployment: Deployment,
    kind: str,
    form: ChangeRequestForm,
    snapshot: StateSnapshot | None,
    *,
    status: int = 200,
    refusal: services.ChangeRefused | None = None,
) -> HttpResponse:
    context = _form_context(deployment, kind, form, snapshot, refusal)
    return render(request, "deployments/change_form.html", context, status=status)


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
    context = _form_context(deployment, kind, form, snapshot)
    panel = render(request, "deployments/change_form.html#preflight", context).content
    # The acknowledgements follow the same answer: only those that apply to it are asked.
    asked = render(
        request, "deployments/change_form.html#acknowledgements", {**context, "oob": True}
    )
    return HttpResponse(panel + asked.content)


@require_POST
@role_required(OPERATOR)
def change_form_probe(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    """ "Probe again" beside the form's snapshot once it is too old: queue a probe of the host;
    with htmx, a card in the snapshot's place follows it until the new snapshot is stored
    (change_form_snapshot), and the pre-flight then follows that snapshot in place. Without
    htmx, back to the form, which opens on the newest snapshot."""
    deployment = _deployment(request, pk, kind)
    host = deployment.host
    previous = host_selectors.latest_snapshot(host)
    error = ""
    try:
        host_services.probe_enqueue(host=host, user=request.user)
    except host_services.HostRefused as exc:
        if exc.code in ("forbidden", "not_found"):
            raise
        error = exc.message
    except host_services.QueueUnavailable as exc:
        error = str(exc)
    if not is_partial(request):
        if error:
            messages.error(request, error)
        else:
            messages.success(request, f"Probe of {host.name} queued: reload once it is stored.")
        return redirect("deployments:change_form", pk=pk, kind=kind)
    context = {"deployment": deployment, "host": host, "kind": kind, "probe_error": error}
    context["after"] = previous.pk if previous is not None else 0
    return render(request, "deployments/change_form.html#snapshot-probing", context)


@require_safe
@role_required(OPERATOR)
def change_form_snapshot(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    """Polled by the card above: the host's newest snapshot once it is newer than `after`,
    with the form's snapshot swapped to it (which asks for the pre-flight on it)."""
    deployment = _deployment(request, pk, kind)
    if not is_partial(request):
        return redirect("deployments:change_form", pk=pk, kind=kind)
    host = deployment.host
    after = request.GET.get("after", "")
    latest = host_selectors.latest_snapshot(host)
    context: dict[str, object] = {"deployment": deployment, "host": host, "kind": kind}
    if latest is None or (after.isdigit() and len(after) < 19 and latest.pk <= int(after)):
        context["after"] = after if after.isdigit() else 0
        return render(request, "deployments/change_form.html#snapshot-probing", context)
    declared = kinds.spec(kind)
    context.update(
        page.snapshot_facts(host, latest, allow_partial=declared.partial_snapshot_ok),
        deployment=deployment,
    )
    card = render(request, "deployments/change_form.html#snapshot", context).content
    field = render(request, "deployments/change_form.html#snapshot-refreshed", context).content
    return HttpResponseStopPolling(card + field)


@require_safe
@role_required(VIEWER)
def change_detail(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        change = selectors.change_for_page(pk, user=request.user)
    except ChangeRequest.DoesNotExist as exc:
        raise Http404("no such change") from exc
    return _change_page(request, change)


def _change_page(
    request: HttpRequest,
    change: ChangeRequest,
    *,
    status: int = 200,
    decision_error: dict[str, str] | None = None,
) -> HttpResponse:
    """The change page (or, polled by htmx, its live parts): what is decided and what happened
    first, the decision beside it while it waits for one, the evidence and the raw output
    after. `decision_error`: a decision's form refused for its reason, with what was typed."""
    finished = change.status in FINAL_STATUSES
    steps = list(change.steps.all())
    events = list(events_of_correlation(change.correlation_id))
    evaluations = list(eval_selectors.change_evaluations(change.pk))
    context = {
        "change": change,
        "steps": steps,
        "finished": finished,
        "approvals": change.approvals.select_related("snapshot"),
        "events": events,
        "story": selectors.change_story(events=events, evaluations=evaluations, steps=steps),
        "before": host_selectors.snapshot_summary(change.before_snapshot or change.snapshot),
        "after": host_selectors.snapshot_summary(change.after_snapshot),
        "failure": host_selectors.snapshot_summary(change.failure_snapshot),
        "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS,
        "evaluations": evaluations,
    }
    if change.status == ChangeStatus.PENDING_APPROVAL:
        review = page.change_review_facts(change)
        latest = review.pop("review_snapshot")
        initial = {"snapshot_id": getattr(latest, "pk", None)}
        context.update(
            review,
            decision_form=DecisionForm(initial=initial),
            decisions=services.change_request_decisions(user=request.user, change=change),
            decision_error=decision_error or {},
        )
    if request.htmx and request.GET.get("fragment") == "live":  # type: ignore[attr-defined]
        # The lead's facts too (status, evaluations, outcome), swapped in beside the decision.
        live = render(request, "deployments/change_detail.html#live", context).content
        lead = render(request, "deployments/change_detail.html#lead", {**context, "oob": True})
        content = live + lead.content
        return HttpResponseStopPolling(content) if finished else HttpResponse(content)
    return render(request, "deployments/change_detail.html", context, status=status)


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


def _decided(
    request: HttpRequest, pk: int, decide: Callable[[], ChangeRequest], *, form: str
) -> HttpResponse:
    """Run `decide()` (one service call) and say on the change page what became of it. A
    forbidden decision is a 403 page with the rule's words (RefusalMiddleware); a reason that
    is not words is answered beside the reason field of `form`, with what was typed kept."""
    try:
        change = decide()
    except services.ChangeRefused as exc:
        if exc.code in ("forbidden", "not_found"):
            raise
        if exc.shown_in == "reason":
            shown = selectors.change_for_page(pk, user=request.user)
            typed = request.POST.get("reason", "")
            error = {"form": form, "message": exc.message, "reason": typed}
            return _change_page(request, shown, status=400, decision_error=error)
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

    return _decided(request, pk, decide, form="approve")


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

    return _decided(request, pk, decide, form="reject")


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

    return _decided(request, pk, decide, form="break_glass")


@require_POST
@role_required(VIEWER)
def change_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    change, form = _decision(request, pk)
    services.change_request_cancel_allowed(change=change, user=request.user)
    if not form.is_valid():
        return _invalid(request, pk)

    def decide() -> ChangeRequest:
        return services.change_request_cancel(change=change, user=request.user)

    return _decided(request, pk, decide, form="cancel")


@require_safe
@role_required(VIEWER)
def approvals(request: HttpRequest) -> HttpResponse:
    page, page_note = selectors.approvals_page(user=request.user, page=request.GET.get("page"))
    context = {
        "page": page,
        "page_note": page_note,
        "ttl": settings.APPROVAL_TTL_SECONDS,
        "rollouts": rollout_selectors.rollouts_waiting(user=request.user),
    }
    return render(request, "deployments/approvals.html", context)


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
