"""A JSON column stored as the exact canonical text that the event hash covers."""

from __future__ import annotations

import json
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

from .chain import canonical_json


class CanonicalJSONField(models.TextField):  # type: ignore[type-arg]
    """Holds a JSON value in Python and its canonical JSON text in the database.

    Why not JSONField: PostgreSQL's jsonb reorders keys and rewrites numbers, so verification
    would have to parse and re-serialise every event's data to rebuild the hashed bytes, which
    is most of the cost of walking the chain. Kept as text, the stored bytes are the hashed
    bytes. Key lookups (`data__status`) are not available; free-text search over the text is.
    `to_python` is left as TextField's on purpose: lookups pass through it, and `icontains`
    must search for the string typed, not for that string parsed as JSON.
    """

    def from_db_value(self, value: Any, expression: Any, connection: BaseDatabaseWrapper) -> Any:
        if value is None:
            return None
        return json.loads(value)

    def get_db_prep_save(self, value: Any, connection: BaseDatabaseWrapper) -> Any:
        # Only saves serialise; lookups (icontains for free text) keep their plain string.
        if value is None:
            return None
        return canonical_json(value)

    def value_to_string(self, obj: models.Model) -> str:
        return canonical_json(self.value_from_object(obj))
