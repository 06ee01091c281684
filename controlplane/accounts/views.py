"""Signing in: the sign-in page (the provider's button, and the password form as LOCAL_LOGIN
says), and the two legs of the identity provider's authorization code flow."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render, resolve_url
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction

from . import oidc, services
from .backends import IDENTITY_BACKEND

logger = logging.getLogger(__name__)

# Where to go after the provider's sign-in, kept in the session between the two legs.
NEXT_SESSION_KEY = "oidc_next"

SIGN_IN_TEMPLATE = "registration/login.html"
LOCAL_LOGIN_OFF = "Password sign-in is switched off here: sign in with {provider}."


def _sign_in_context(request: HttpRequest) -> dict[str, Any]:
    return {
        "oidc_configured": oidc.configured(),
        "oidc_provider_name": settings.OIDC_PROVIDER_NAME,
        "local_login": settings.LOCAL_LOGIN,
    }


class SignInView(LoginView):
    """Django's sign-in page, with the identity provider's button and LOCAL_LOGIN: `off` shows
    no password form and refuses one posted anyway (before django-axes or a backend hears of
    it); `admins` keeps it for superusers (controlplane.accounts.backends)."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), **_sign_in_context(self.request)}

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if settings.LOCAL_LOGIN == "off":
            return self._refused(LOCAL_LOGIN_OFF.format(provider=settings.OIDC_PROVIDER_NAME))
        response: HttpResponse = super().post(request, *args, **kwargs)
        return response

    def _refused(self, message: str, status: int = 403) -> HttpResponse:
        context = self.get_context_data(form=AuthenticationForm(self.request))
        context["sign_in_error"] = message
        return render(self.request, SIGN_IN_TEMPLATE, context, status=status)


def _redirect_uri(request: HttpRequest) -> str:
    """The callback URL to register at the provider: under CONTROLPLANE_BASE_URL when set (a
    proxy in front), else as this request reached us."""
    path = reverse("accounts:oidc_callback")
    base = settings.CONTROLPLANE_BASE_URL.rstrip("/")
    return f"{base}{path}" if base else request.build_absolute_uri(path)


def _refusal(request: HttpRequest, refused: oidc.SignInRefused) -> HttpResponse:
    audit.record(
        action=AuditAction.AUTH_LOGIN_FAILED,
        actor="anonymous:identity_provider",
        request=request,
        data={"method": "identity_provider", "reason": refused.reason},
    )
    logger.warning("sign-in at the identity provider refused: %s", refused.reason)
    context = _sign_in_context(request)
    context["sign_in_error"] = refused.message
    context["form"] = AuthenticationForm(request)
    return render(request, SIGN_IN_TEMPLATE, context, status=refused.status)


@login_not_required
@require_GET
def oidc_start(request: HttpRequest) -> HttpResponse:
    """Leg one: off to the provider, with state, nonce and PKCE kept in this session."""
    if not oidc.configured():
        raise Http404("No identity provider is configured.")
    wanted = request.GET.get("next", "")
    safe = url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    request.session[NEXT_SESSION_KEY] = wanted if safe else ""
    try:
        return oidc.authorization_redirect(request, redirect_uri=_redirect_uri(request))
    except oidc.ProviderUnavailable as down:
        return _refusal(request, oidc.SignInRefused("provider_unavailable", str(down), status=503))


@login_not_required
@require_GET
def oidc_callback(request: HttpRequest) -> HttpResponse:
    """Leg two: the provider's answer verified, the user found by issuer and subject (made on
    first sign-in) with their groups as the provider says now, and signed in."""
    if not oidc.configured():
        raise Http404("No identity provider is configured.")
    try:
        signed_in = oidc.callback_verify(request)
        user = services.identity_sign_in(signed_in=signed_in, request=request)
    except oidc.SignInRefused as refused:
        return _refusal(request, refused)
    except (oidc.ProviderUnavailable, oidc.TokenNotAccepted) as failed:
        return _refusal(
            request, oidc.SignInRefused("provider_unavailable", str(failed), status=503)
        )
    wanted = request.session.pop(NEXT_SESSION_KEY, "")
    login(request, user, backend=IDENTITY_BACKEND)  # a new session key: no fixation
    oidc.access_token_keep(request.session, signed_in.access_token)
    return HttpResponseRedirect(wanted or resolve_url(settings.LOGIN_REDIRECT_URL))
