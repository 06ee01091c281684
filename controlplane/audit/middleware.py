"""Binds each request's user, address and a fresh correlation id to the audit context."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from . import context


class AuditRequestMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        ip = request.META.get("REMOTE_ADDR") or None
        agent = request.META.get("HTTP_USER_AGENT", "")[:300]
        user = request.user if request.user.is_authenticated else None
        with context.acting(
            user, correlation_id=context.new_correlation_id(), ip=ip, user_agent=agent
        ):
            return self.get_response(request)
