"""Rollout pages: the list, the form, the live page (htmx polling that stops once nothing can
move any more) and one small view per decision. Thin: parse, call one service, render."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST, require_safe
from django_htmx.http import HttpResponseStopPolling

from controlplane.accounts.decorators import role_required
from controlplane.accounts.roles import OPERATOR, VIEWER
from controlplane.audit.selectors import events_of_correlation

from . import access, decisions, requests, selectors
from .access import RolloutRefused
from .choices import RolloutStatus
from .forms import ReasonForm, RolloutForm
from .models import Rollout


def _visible(request: HttpRequest, pk: int) -> Rollout:
    rollout = selectors.rollout_for_user(user=request.user, pk=pk)
    if rollout is None:
        raise Http404("no such rollout")
    return rollout


@require_safe
@role_required(VIEWER)
def rollout_list(request: HttpRequest) -> HttpResponse:
    rollouts = selectors.rollouts_visible(request.user)[:100]
    return render(request, "deployments/rollouts/list.html", {"rollouts": rollouts})


@require_http_methods(["GET", "HEAD", "POST"])
@role_required(OPERATOR)
def rollout_create(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        form = RolloutForm(user=request.user)
        return render(request, "deployments/rollouts/form.html", {"form": form})
    form = RolloutForm(request.POST, user=request.user)
    if not form.is_valid():
        return render(request, "deployments/rollouts/form.html", {"form": form}, status=400)
    try:
        rollout = requests.rollout_create(user=request.user, **form.service_arguments())
    except RolloutRefused as exc:
        if exc.code == "forbidden":
            raise
        form.add_error(None, exc.message)
        for name, text in (exc.details.get("fields") or {}).items():
            if name in form.fields and isinstance(text, str):  # shown beside the field too
                form.add_error(name, text)
        return render(
            request, "deployments/rollouts/form.html", {"form": form}, status=exc.http_status
        )
    messages.success(request, f"Rollout #{rollout.pk} requested: it waits for a second person.")
    return redirect("rollouts:detail", pk=rollout.pk)


@require_safe
@role_required(VIEWER)
def rollout_detail(request: HttpRequest, pk: int) -> HttpResponse:
    rollout = _visible(request, pk)
    page = selectors.rollout_page(rollout)
    context = {
        "page": page,
        "rollout": rollout,
        "events": events_of_correlation(rollout.correlation_id),
    }
    if rollout.status == RolloutStatus.PENDING_APPROVAL:
        context["review"] = selectors.rollout_review(rollout)
    if request.htmx and request.GET.get("fragment") == "live":  # type: ignore[attr-defined]
        response = render(request, "deployments/rollouts/detail.html#live", context)
        return HttpResponseStopPolling(response.content) if page.finished else response
    return render(request, "deployments/rollouts/detail.html", context)


def _decided(
    request: HttpRequest, pk: int, allowed: Callable[[], None], decide: Callable[[str], Rollout]
) -> HttpResponse:
    """Check who may first (a 403 whatever was sent), then parse, decide and say what became of
    it on the rollout's page; a forbidden decision is a 403 page (RefusalMiddleware)."""
    allowed()
    form = ReasonForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The form was not valid.")
        return redirect("rollouts:detail", pk=pk)
    try:
        rollout = decide(form.cleaned_data.get("reason") or "")
    except RolloutRefused as exc:
        if exc.code == "forbidden":
            raise
        messages.error(request, exc.message)
        return redirect("rollouts:detail", pk=pk)
    messages.success(request, f"Rollout #{rollout.pk}: {rollout.get_status_display()}.")
    return redirect("rollouts:detail", pk=pk)


@require_POST
@role_required(VIEWER)
def rollout_approve(request: HttpRequest, pk: int) -> HttpResponse:
    rollout = _visible(request, pk)
    return _decided(
        request,
        pk,
        lambda: access.rollout_decide_allowed(user=request.user),
        lambda reason: decisions.rollout_approve(
            rollout=rollout, approver=request.user, reason=reason
        ),
    )


@require_POST
@role_required(VIEWER)
def rollout_reject(request: HttpRequest, pk: int) -> HttpResponse:
    rollout = _visible(request, pk)
    return _decided(
        request,
        pk,
        lambda: access.rollout_decide_allowed(user=request.user),
        lambda reason: decisions.rollout_reject(
            rollout=rollout, approver=request.user, reason=reason
        ),
    )


@require_POST
@role_required(VIEWER)
def rollout_pause(request: HttpRequest, pk: int) -> HttpResponse:
    rollout = _visible(request, pk)
    return _decided(
        request,
        pk,
        lambda: access.rollout_control_allowed(user=request.user),
        lambda reason: decisions.rollout_pause(rollout=rollout, user=request.user, reason=reason),
    )


@require_POST
@role_required(VIEWER)
def rollout_resume(request: HttpRequest, pk: int) -> HttpResponse:
    rollout = _visible(request, pk)
    return _decided(
        request,
        pk,
        lambda: access.rollout_control_allowed(user=request.user),
        lambda reason: decisions.rollout_resume(rollout=rollout, user=request.user, reason=reason),
    )


@require_POST
@role_required(VIEWER)
def rollout_abort(request: HttpRequest, pk: int) -> HttpResponse:
    rollout = _visible(request, pk)
    return _decided(
        request,
        pk,
        lambda: access.rollout_control_allowed(user=request.user),
        lambda reason: decisions.rollout_abort(rollout=rollout, user=request.user, reason=reason),
    )
