"""Cursor pagination whose cursors are checked before they reach a query.

DRF's CursorPagination trusts the position inside a cursor; a hand-made cursor with a
position of the wrong type would fail inside the database. Here a cursor that does not decode,
or whose position does not fit the ordering field, is a 400.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from rest_framework import exceptions
from rest_framework.pagination import CursorPagination

BIGINT_MAX = 2**63 - 1


class StableCursorPagination(CursorPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
    ordering: Any = "-id"

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> Any:
        self._model = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request: Any) -> Any:
        try:
            cursor = super().decode_cursor(request)
        except exceptions.NotFound as exc:
            raise exceptions.ValidationError({self.cursor_query_param: [str(exc.detail)]}) from exc
        if cursor is not None and cursor.position is not None:
            self._check_position(cursor.position)
        return cursor

    def _check_position(self, position: str) -> None:
        ordering = self.ordering if isinstance(self.ordering, str) else self.ordering[0]
        try:
            field = self._model._meta.get_field(ordering.lstrip("-"))
        except FieldDoesNotExist:
            return
        bad = exceptions.ValidationError({self.cursor_query_param: ["Invalid cursor"]})
        if "\x00" in position:
            raise bad
        try:
            value = field.to_python(position)
        except DjangoValidationError as exc:
            raise bad from exc
        if isinstance(field, models.IntegerField) and not -BIGINT_MAX <= value <= BIGINT_MAX:
            raise bad
        if isinstance(field, models.DateTimeField) and value is None:
            raise bad


class NamePagination(StableCursorPagination):
    ordering = "name"


class IdPagination(StableCursorPagination):
    ordering = "id"


class NewestIdPagination(StableCursorPagination):
    ordering = "-id"


class SnapshotPagination(StableCursorPagination):
    ordering = ("-taken_at", "-id")
