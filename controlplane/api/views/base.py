"""What every API view shares: authentication, roles, the audit actor, lookups that 404."""

from __future__ import annotations

import contextlib
import re
from typing import Any

from django.db.models import Model, QuerySet
from django.http import Http404
from rest_framework import exceptions
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.audit import context as audit_context
from hosts.models import Host
from hosts.validators import HOST_NAME_RE

from ..serializers.fields import BIGINT_MAX

_HOST_NAME = re.compile(HOST_NAME_RE)


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


def host_or_404(name: str) -> Host:
    # Names are validated at creation, so one that breaks the pattern names no host; checking
    # first also keeps odd bytes (NUL, say) away from the database.
    if not _HOST_NAME.fullmatch(name):
        raise exceptions.NotFound("No such host.")
    host = Host.objects.select_related("credential").filter(name=name).first()
    if host is None:
        raise exceptions.NotFound("No such host.")
    return host


def row_or_404(queryset: QuerySet[Any], pk: int, what: str) -> Model:
    row = queryset.filter(pk=pk).first() if 0 < pk <= BIGINT_MAX else None
    if row is None:
        raise exceptions.NotFound(f"No such {what}.")
    return row
