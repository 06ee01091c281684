"""What every API view shares: authentication, roles, the audit actor, lookups that 404."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.db.models import Model, QuerySet
from django.http import Http404
from rest_framework import exceptions
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.audit import context as audit_context

from ..fields import BIGINT_MAX


class APIView(GenericAPIView):
    # Authentication and permissions come from REST_FRAMEWORK's defaults: a token, then the
    # session; authenticated and holding the role that `required_roles` names for the method.
    # (A comment, not a docstring: the schema would show a docstring on every operation.)

    required_roles: dict[str, Any] = {}

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        with contextlib.ExitStack() as scope:
            self._audit_scope = scope
            return super().dispatch(request, *args, **kwargs)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        # The audit middleware ran before DRF authenticated the token, so it saw an anonymous
        # request; from here on every event this request writes names the token's owner.
        self._audit_scope.enter_context(audit_context.acting(request.user))

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        try:
            return super().perform_content_negotiation(request, force)
        except Http404 as exc:  # an unknown ?format=
            raise exceptions.ValidationError({"format": ["Unknown format."]}) from exc

    def page_response(self, queryset: QuerySet[Any], **context: Any) -> Response:
        page = self.paginate_queryset(queryset)
        data = self.get_serializer(page, many=True, **context).data
        return self.get_paginated_response(data)


def endpoint(view: type[APIView]) -> Callable[..., Any]:
    """`view` for a URL pattern. LoginRequiredMiddleware would send a token request (anonymous
    to Django's session auth) to the sign-in page, so API views are exempt from it (DRF's
    as_view marks them so too; saying it here keeps that visible) and DRF answers 401 itself."""
    return login_not_required(view.as_view())


def row_or_404(queryset: QuerySet[Any], pk: int, what: str) -> Model:
    row = queryset.filter(pk=pk).first() if 0 < pk <= BIGINT_MAX else None
    if row is None:
        raise exceptions.NotFound(f"No such {what}.")
    return row
