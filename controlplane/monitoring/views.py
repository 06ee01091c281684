"""GET /metrics: the Prometheus exposition, for a scraper with the bearer token (every host) or
a person signed in with a role (the hosts they see)."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client.exposition import choose_encoder

from controlplane.accounts.roles import VIEWER, Scope, has_role, user_scope

from .collector import registry, registry_for


def _unauthorized(message: str) -> HttpResponse:
    response = HttpResponse(message + "\n", status=401, content_type="text/plain")
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


def _bearer_token(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


@login_not_required  # a scraper has no session; the checks below replace the login redirect
@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    expected = settings.METRICS_TOKEN
    presented = _bearer_token(request)
    scope: Scope | None = None  # the scraper's: every host
    if presented is not None:
        # A wrong token is refused even alongside a session, so a misconfigured scraper shows.
        if not (expected and hmac.compare_digest(presented.encode(), expected.encode())):
            return _unauthorized("invalid bearer token")
    elif request.user.is_authenticated:
        if not has_role(request.user, VIEWER):
            raise PermissionDenied("Metrics need a role.")
        scope = user_scope(request.user)
    elif expected:
        return _unauthorized("send Authorization: Bearer <METRICS_TOKEN>")
    else:
        return redirect_to_login(request.get_full_path())
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    shown = registry() if scope is None else registry_for(scope)
    return HttpResponse(encoder(shown), content_type=content_type)
