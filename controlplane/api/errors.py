"""One shape for every refusal: `{"detail": ..., "code": ...}` plus what the code needs.

Services raise `controlplane.refusals.Refused` (ChangeRefused, HostRefused, QueueUnavailable,
...) carrying the HTTP status it maps to, from the one table the pages use too; this handler
turns them into responses, so views only call services.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import exception_handler

from controlplane.refusals import Refused


def refusal_body(exc: Refused) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": exc.message, "code": exc.code}
    details = dict(exc.details)
    if exc.code == "stale":
        age = details.pop("age_seconds", None)
        body["snapshot_age_seconds"] = round(age, 3) if age is not None else None
        body["limit_seconds"] = details.pop("limit", None)
    body.update(details)
    return body


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, Refused):
        return Response(refusal_body(exc), status=exc.http_status)
    if isinstance(exc, DjangoValidationError):
        # A model-level validator caught what the serializer did not: still the client's input.
        exc = exceptions.ValidationError(exc.messages)
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.APIException) and isinstance(response.data, dict):
        detail = response.data.get("detail")
        if detail is not None and "code" not in response.data:
            response.data["code"] = getattr(detail, "code", None) or exc.default_code
    return response


class RefusalSerializer(serializers.Serializer):
    """What a refused request answers: the rule's reason and which rule."""

    detail = serializers.CharField()
    code = serializers.CharField(help_text="stale, forbidden, conflict, invalid, drifted, ...")
    snapshot_age_seconds = serializers.FloatField(
        required=False, allow_null=True, help_text="stale only: the snapshot's age."
    )
    limit_seconds = serializers.IntegerField(
        required=False, allow_null=True, help_text="stale only: SNAPSHOT_MAX_AGE_SECONDS."
    )
    needs_acknowledgement = serializers.BooleanField(
        required=False, help_text="conflict: requests are in flight; send acknowledge_busy."
    )
    needs_unknown_acknowledgement = serializers.BooleanField(
        required=False,
        help_text="conflict: the snapshot is partial; a stop or restart may send "
        "acknowledge_unknown after reading `unknown`.",
    )
    unknown = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="what the snapshot could not read"
    )
