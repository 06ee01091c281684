"""The hash chain's arithmetic: canonical JSON and SHA-256. Pure functions, no database."""

from __future__ import annotations

import hashlib
import json
from typing import Any

GENESIS_HASH = "0" * 64

# The fields that the hash covers, in the order they appear in the canonical form.
HASHED_FIELDS = (
    "seq",
    "created_at",
    "actor",
    "actor_user_id",
    "action",
    "target_type",
    "target_id",
    "target_label",
    "host_id",
    "host_label",
    "snapshot_id",
    "snapshot_digest",
    "snapshot_age_seconds",
    "correlation_id",
    "data",
    "ip",
    "user_agent",
    "prev_hash",
)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def event_payload(fields: dict[str, Any]) -> dict[str, Any]:
    payload = {name: fields.get(name) for name in HASHED_FIELDS}
    created = payload["created_at"]
    if created is not None and not isinstance(created, str):
        payload["created_at"] = created.isoformat()
    return payload


def event_hash(fields: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(event_payload(fields)).encode()).hexdigest()
