"""One shape for every refusal: `{"detail": ..., "code": ...}` plus what the code needs.

The services raise ChangeRefused (code stale, forbidden, conflict or invalid) and the probe
queue QueueUnavailable; this handler turns them into statuses, so views only call services.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from deployments.services import ChangeRefused
from hosts.services import QueueUnavailable

# Same mapping as the pages (deployments.views.REFUSAL_STATUS).
REFUSAL_STATUS = {
    "stale": status.HTTP_409_CONFLICT,
    "conflict": status.HTTP_409_CONFLICT,
    "forbidden": status.HTTP_403_FORBIDDEN,
    "invalid": status.HTTP_400_BAD_REQUEST,
}


def refusal_body(exc: ChangeRefused) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": exc.message, "code": exc.code}
    details = dict(exc.details)
    if exc.code == "stale":
        age = details.pop("age_seconds", None)
        body["snapshot_age_seconds"] = round(age, 3) if age is not None else None
        body["limit_seconds"] = details.pop("limit", None)
    body.update(details)
    return body


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ChangeRefused):
        return Response(refusal_body(exc), status=REFUSAL_STATUS.get(exc.code, 400))
    if isinstance(exc, QueueUnavailable):
        return Response(
            {"detail": str(exc), "code": "queue_unavailable"},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
        )
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
