"""A removed group removes the role at the next request that needs it, not at the next sign-in.

Before every request that acts (POST, PUT, PATCH, DELETE, on pages and the session-signed API)
and before a read once OIDC_GROUPS_RECHECK_SECONDS have passed since the provider last said,
a user who signed in at the identity provider is asked about again: userinfo, with the access
token of this sign-in. Their groups are replaced by the answer (and so their roles), or, if the
provider no longer accepts the token (expired, revoked, the user gone), the session ends and
they are sent to sign in. A provider that does not answer refuses the request (503) rather than
act on groups it could not confirm. Local accounts and API tokens are not affected here (API
tokens: accounts.services.api_token_refusal).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import BACKEND_SESSION_KEY
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render, resolve_url
from django.urls import Resolver404, resolve, reverse
from django.utils import timezone
from django.utils.html import escape
from rest_framework.views import APIView

from controlplane.htmx import is_partial

from . import oidc, services
from .backends import IDENTITY_BACKEND
from .roles import scope_forget

logger = logging.getLogger(__name__)

READS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def _exempt_paths() -> frozenset[str]:
    # Signing in and out needs no fresh groups (and signing out must work when the provider
    # does not answer).
    return frozenset(
        {
            resolve_url(settings.LOGIN_URL),
            reverse("logout"),
            reverse("accounts:oidc_start"),
            reverse("accounts:oidc_callback"),
        }
    )


def _is_api(request: HttpRequest) -> bool:
    """A request to the JSON API (DRF's views; the token page under /api/ is a page), which is
    answered in JSON."""
    try:
        view = resolve(request.path_info).func
    except Resolver404:
        return False
    cls = getattr(view, "cls", None)
    return isinstance(cls, type) and issubclass(cls, APIView)


class IdentityRecheckMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # Only sessions the provider vouched for: a local account's request costs no query.
        if (
            request.session.get(BACKEND_SESSION_KEY) != IDENTITY_BACKEND
            or request.path_info in _exempt_paths()
        ):
            return self.get_response(request)
        identity = services.identity_of(request.user)
        if identity is None:
            return self.get_response(request)
        acting = request.method not in READS
        if acting or services.identity_groups_due(identity=identity, now=timezone.now()):
            try:
                services.identity_groups_refresh(
                    identity=identity,
                    access_token=oidc.access_token_of(request.session),
                    request=request,
                )
            except oidc.TokenNotAccepted as ended:
                return self._sign_in_ended(request, str(ended))
            except oidc.ProviderUnavailable as down:
                logger.warning("groups not re-checked: %s", down)
                return self._unavailable(request, str(down))
            scope_forget(request.user)
        return self.get_response(request)

    def _sign_in_ended(self, request: HttpRequest, reason: str) -> HttpResponse:
        services.sign_in_end(request=request, reason=reason)
        message = f"Your sign-in has ended: {reason} Sign in again."
        if _is_api(request):
            return JsonResponse({"detail": message, "code": "sign_in_ended"}, status=401)
        messages.warning(request, message)
        login = resolve_url(settings.LOGIN_URL)
        if request.method in READS:
            login = f"{login}?{urlencode({'next': request.get_full_path()})}"
        # An htmx request gets HX-Redirect from controlplane.views.HtmxSignInRedirectMiddleware.
        return HttpResponseRedirect(login)

    def _unavailable(self, request: HttpRequest, detail: str) -> HttpResponse:
        message = (
            "Your groups at the identity provider could not be confirmed, so this was not "
            f"done: {detail} Try again in a moment."
        )
        response: HttpResponse
        if _is_api(request):
            body = {"detail": message, "code": "identity_provider_unavailable"}
            response = JsonResponse(body, status=503)
        elif is_partial(request):
            response = HttpResponse(
                f'<span class="error refusal">{escape(message)}</span>', status=503
            )
        else:
            context = {"message": message, "status": 503, "roles": []}
            response = render(request, "refused.html", context, status=503)
        response["Retry-After"] = "10"
        return response
