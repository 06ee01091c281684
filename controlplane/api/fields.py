"""Serializer fields shared by every app's API (hosts.api, deployments.api, ...)."""

from __future__ import annotations

from typing import Any

from django.db.models import Model, QuerySet
from rest_framework import serializers

BIGINT_MAX = 2**63 - 1


class RowField(serializers.IntegerField):
    """An id in the request body that must name an existing row; answers with the row.

    Stricter than PrimaryKeyRelatedField: `true`, `1.5` or an id past the database's integer
    range are refused as input errors instead of being coerced or reaching the database.
    """

    default_error_messages = {"does_not_exist": "No {model} with id {pk_value}."}

    def __init__(self, queryset: QuerySet[Any], **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", BIGINT_MAX)
        super().__init__(**kwargs)
        self.queryset = queryset

    def run_validation(self, data: Any = serializers.empty) -> Model | None:
        # The integer and its range are checked first; only a plausible id reaches the query.
        pk = super().run_validation(data)
        if pk is None:
            return None
        row = self.queryset.filter(pk=pk).first()
        if row is None:
            self.fail("does_not_exist", model=self.queryset.model._meta.verbose_name, pk_value=pk)
        return row

    def to_representation(self, value: Any) -> int:
        return int(value.pk if isinstance(value, Model) else value)
