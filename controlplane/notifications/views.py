"""Notification pages: endpoints (administrators manage them) and deliveries with every attempt
(everyone with a role reads them)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from controlplane.accounts.decorators import role_required, superuser_required
from controlplane.accounts.roles import VIEWER
from controlplane.htmx import is_partial

from . import destinations, selectors, services
from .choices import DeliveryStatus
from .forms import WebhookEndpointForm
from .models import WebhookEndpoint


def _deliveries_context(request: HttpRequest) -> dict[str, Any]:
    status = request.GET.get("status", "")
    endpoint = request.GET.get("endpoint", "")
    endpoint_id = int(endpoint) if endpoint.isdigit() else None
    deliveries = selectors.deliveries_recent(
        user=request.user, status=status, endpoint_id=endpoint_id
    )
    query = "&".join(
        f"{k}={v}" for k, v in (("status", status), ("endpoint", endpoint_id or "")) if v
    )
    return {
        "deliveries": deliveries,
        "polling": selectors.deliveries_any_open(deliveries),
        "status": status if status in DeliveryStatus.values else "",
        "endpoint_id": endpoint_id,
        "query": query,
        "statuses": DeliveryStatus.choices,
    }


@require_safe
@role_required(VIEWER)
def index(request: HttpRequest) -> HttpResponse:
    context = _deliveries_context(request)
    if is_partial(request):
        # The deliveries table refreshes itself while a delivery is open, then stops.
        return render(request, "notifications/index.html#deliveries", context)
    context["endpoints"] = selectors.endpoints_list()
    return render(request, "notifications/index.html", context)


@require_safe
@role_required(VIEWER)
def delivery_detail(request: HttpRequest, pk: int) -> HttpResponse:
    delivery = selectors.delivery_get(pk=pk, user=request.user)
    if delivery is None:
        raise Http404("no such delivery")
    return render(request, "notifications/delivery_detail.html", {"delivery": delivery})


def _form_values(form: WebhookEndpointForm) -> dict[str, Any]:
    data = form.cleaned_data
    return {
        "name": data["name"],
        "url": data["url"],
        "event_types": data["event_types"],
        "active": data["active"],
        "host_groups": data["host_groups"],
    }


@require_http_methods(["GET", "HEAD", "POST"])
@superuser_required
def endpoint_create(request: HttpRequest) -> HttpResponse:
    own_hosts = destinations.request_hosts(request)
    form = WebhookEndpointForm(
        request.POST if request.method == "POST" else None,
        initial={"active": True},
        own_hosts=own_hosts,
    )
    if request.method == "POST" and form.is_valid():
        endpoint = services.endpoint_create(
            actor=request.user,
            secret=form.cleaned_data["secret"],
            own_hosts=own_hosts,
            **_form_values(form),
        )
        messages.success(request, f"Endpoint {endpoint.name} created.")
        return redirect("notifications:index")
    return render(request, "notifications/endpoint_form.html", {"form": form, "endpoint": None})


@require_http_methods(["GET", "HEAD", "POST"])
@superuser_required
def endpoint_edit(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = get_object_or_404(WebhookEndpoint, pk=pk)
    own_hosts = destinations.request_hosts(request)
    form = WebhookEndpointForm(
        request.POST if request.method == "POST" else None, instance=endpoint, own_hosts=own_hosts
    )
    if request.method == "POST" and form.is_valid():
        services.endpoint_update(
            actor=request.user,
            endpoint=endpoint,
            secret=form.cleaned_data["secret"] or None,
            own_hosts=own_hosts,
            **_form_values(form),
        )
        messages.success(request, f"Endpoint {form.cleaned_data['name']} saved.")
        return redirect("notifications:index")
    return render(request, "notifications/endpoint_form.html", {"form": form, "endpoint": endpoint})


@require_POST
@superuser_required
def endpoint_set_active(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = get_object_or_404(WebhookEndpoint, pk=pk)
    active = request.POST.get("active") == "1"
    services.endpoint_set_active(
        actor=request.user,
        endpoint=endpoint,
        active=active,
        own_hosts=destinations.request_hosts(request),
    )
    messages.success(request, f"Endpoint {endpoint.name} {'enabled' if active else 'disabled'}.")
    return redirect("notifications:index")


@require_http_methods(["GET", "HEAD", "POST"])
@superuser_required
def endpoint_delete(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = get_object_or_404(WebhookEndpoint, pk=pk)
    if request.method == "POST":
        services.endpoint_delete(actor=request.user, endpoint=endpoint)
        messages.success(request, f"Endpoint {endpoint.name} deleted; its deliveries stay.")
        return redirect("notifications:index")
    return render(request, "notifications/endpoint_confirm_delete.html", {"endpoint": endpoint})


@require_POST
@superuser_required
def endpoint_test(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = get_object_or_404(WebhookEndpoint, pk=pk)
    delivery = services.endpoint_send_test(actor=request.user, endpoint=endpoint)
    messages.success(request, f"Test notification queued as delivery #{delivery.pk}.")
    return redirect("notifications:delivery", pk=delivery.pk)
