"""Entering and leaving a host's maintenance from the host page (htmx swaps the card; without
JavaScript each form posts and comes back to the host page). The rules are the service's."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from controlplane.accounts.decorators import role_required
from controlplane.accounts.roles import VIEWER
from controlplane.htmx import is_partial

from . import services
from .forms import MaintenanceForm
from .models import Host
from .scope import hosts_visible
from .services.maintenance import require_maintain_permission

CARD = "hosts/partials/maintenance.html"
# htmx swaps only 2xx answers by default; app.js swaps this one too, so that the card comes
# back with the form's errors in place of the form.
REFUSED_FRAGMENT = 422


def maintenance_card(
    user: Any,
    host: Host,
    *,
    form: MaintenanceForm | None = None,
    notice: str = "",
    error: str = "",
) -> dict[str, Any]:
    """The maintenance card's context: the host page includes it (templatetags.maintenance)
    and the views below answer it."""
    return {
        "host": host,
        "may_maintain": services.user_may_maintain(user, host),
        "maintenance_form": form or MaintenanceForm.offered(),
        "maintenance_notice": notice,
        "maintenance_error": error,
        "max_days": services.MAINTENANCE_MAX.days,
    }


def _answer(request: HttpRequest, host: Host, status: int = 200, **card: Any) -> HttpResponse:
    """The card (htmx), or the host page again with what happened said in a message; a
    refusal without JavaScript is the maintenance page with the form and its error."""
    context = maintenance_card(request.user, host, **card)
    if is_partial(request):
        return render(request, CARD, context, status=REFUSED_FRAGMENT if status >= 400 else 200)
    if status >= 400:
        return render(request, "hosts/maintenance.html", context, status=status)
    if card.get("notice"):
        messages.success(request, card["notice"])
    return redirect("hosts:detail", name=host.name)


@require_http_methods(["GET", "HEAD", "POST"])
@role_required(VIEWER)
def maintenance(request: HttpRequest, name: str) -> HttpResponse:
    """GET: the maintenance card on a page of its own. POST: enter maintenance, or change the
    reason and end time of the one the host is in."""
    host = get_object_or_404(hosts_visible(request.user), name=name)
    if request.method != "POST":
        return render(request, "hosts/maintenance.html", maintenance_card(request.user, host))
    require_maintain_permission(request.user, host)  # a 403 before the input is read
    form = MaintenanceForm(request.POST)
    if not form.is_valid():
        return _answer(request, host, 400, form=form)
    try:
        entered = services.host_maintenance_enter(
            host=host,
            user=request.user,
            reason=form.cleaned_data["reason"],
            until=form.cleaned_data["until"],
        )
    except services.HostRefused as exc:
        if exc.code == "forbidden":
            raise
        field = next(iter(exc.details.get("fields") or {}), None)
        form.add_error(field, exc.message)
        return _answer(request, host, exc.http_status, form=form)
    until = entered.host.maintenance_until
    notice = f"{host.name} is in maintenance until {until:%Y-%m-%d %H:%M} UTC."
    if entered.changed:
        notice = f"{host.name}'s maintenance now lasts until {until:%Y-%m-%d %H:%M} UTC."
    if entered.running_change is not None:
        notice += (
            f" Change #{entered.running_change} is running on it: maintenance does not stop it."
        )
    return _answer(request, entered.host, notice=notice)


@require_POST
@role_required(VIEWER)
def maintenance_leave(request: HttpRequest, name: str) -> HttpResponse:
    host = get_object_or_404(hosts_visible(request.user), name=name)
    try:
        host = services.host_maintenance_leave(host=host, user=request.user)
    except services.HostRefused as exc:
        if exc.code == "forbidden":
            raise
        return _answer(request, host, exc.http_status, error=exc.message)
    return _answer(request, host, notice=f"{host.name} is out of maintenance.")
