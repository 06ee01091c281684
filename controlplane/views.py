"""Pages of the project itself: a refusal, and a 403 that says which role is needed."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

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


def _escape(text: str) -> str:
    from django.utils.html import escape

    return str(escape(text))
