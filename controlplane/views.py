"""Pages of the project itself: a refusal, and a 403 that says which role is needed."""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render, resolve_url
from django.template import loader
from django.views import defaults
from django_htmx.http import HttpResponseClientRedirect

from controlplane.accounts.roles import user_roles
from controlplane.htmx import is_partial
from controlplane.refusals import Refused


def refusal_response(request: HttpRequest, message: str, status: int) -> HttpResponse:
    """A refusal as a page, or as a fragment an htmx target can show in place."""
    if is_partial(request):
        return HttpResponse(f'<span class="error refusal">{_escape(message)}</span>', status=status)
    context = {"message": message, "status": status, "roles": sorted(user_roles(request.user))}
    return render(request, "refused.html", context, status=status)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler403: the guard's own words ("This needs the operator role.")."""
    message = str(exception) if exception and str(exception) else "You may not do this."
    return refusal_response(request, message, 403)


DATABASE_UNAVAILABLE = (
    "The database is not answering, so this could not be done or shown. Try again in a "
    "moment; if you were submitting a change, look for it in the change list before you "
    "submit it again."
)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500. A database that does not answer (a restart, a failover, dropped
    connections) is an outage, not a bug: 503 with Retry-After and words, as the API's JSON
    shape or as a page that needs no database (base.html asks it who is signed in). Anything
    else stays Django's plain 500 page."""
    error = sys.exc_info()[1]
    if not isinstance(error, OperationalError | InterfaceError):
        return defaults.server_error(request)
    response: HttpResponse
    if request.path.startswith("/api/"):
        body = {"detail": DATABASE_UNAVAILABLE, "code": "database_unavailable"}
        response = JsonResponse(body, status=503)
    else:
        page = loader.render_to_string(
            "database_unavailable.html", {"message": DATABASE_UNAVAILABLE}
        )
        response = HttpResponse(page, status=503)
    response["Retry-After"] = "10"
    return response


class RefusalMiddleware:
    """A service's `Refused` that reaches the top of a page view becomes its HTTP status and
    the rule's own message, from controlplane.refusals' one table."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response: HttpResponse = self.get_response(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, Refused):
            return refusal_response(request, exception.message, exception.http_status)
        return None


class HtmxSignInRedirectMiddleware:
    """A sign-in that expired while a page polled: an htmx request redirected to sign in would
    swap the sign-in form into a table row. Tell htmx to load the sign-in page instead."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response: HttpResponse = self.get_response(request)
        if getattr(request, "htmx", False) and response.status_code == 302:
            location = response.get("Location", "")
            if location.startswith(resolve_url(settings.LOGIN_URL)):
                return HttpResponseClientRedirect(location)
        return response


def _escape(text: str) -> str:
    from django.utils.html import escape

    return str(escape(text))
