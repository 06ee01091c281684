"""The hash chain's arithmetic: canonical JSON and SHA-256. Pure functions, no database.

An event's hash is SHA-256 over the UTF-8 of `canonical_json(event_payload(fields))`: the
fields in HASHED_FIELDS (which include `prev_hash`) as JSON with sorted keys, no whitespace and
no ASCII escaping. Anyone can recompute it with any JSON library that sorts keys.

`row_hash` produces exactly those bytes without building the payload dict, because
verification hashes every event in the log and `json.dumps` over a whole event is the slowest
step of that walk.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
from functools import lru_cache
from json.encoder import encode_basestring as _str
from typing import Any

from controlplane.canonical import canonical_json

GENESIS_HASH = "0" * 64

# The fields that the hash covers.
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

_dumps_canonical = canonical_json


def iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.datetime) else value


@lru_cache(maxsize=4096)
def normalize_ip(value: str | None) -> str | None:
    """One spelling per address, or None for something that is not one.

    PostgreSQL's inet rewrites addresses (IPv6 comes back compressed), and the hash must not
    depend on which spelling the database hands back.
    """
    if not value:
        return None
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def event_payload(fields: dict[str, Any]) -> dict[str, Any]:
    payload = {name: fields.get(name) for name in HASHED_FIELDS}
    payload["created_at"] = iso(payload["created_at"])
    payload["ip"] = normalize_ip(payload["ip"])
    return payload


def event_hash(fields: dict[str, Any]) -> str:
    """The definition: SHA-256 over the canonical JSON of the hashed fields."""
    return hashlib.sha256(canonical_json(event_payload(fields)).encode()).hexdigest()


def _nullable(value: Any) -> str:
    if value is None:
        return "null"
    kind = type(value)
    if kind is int:
        return str(value)
    if kind is float and value - value == 0:  # finite: json.dumps writes float.__repr__
        return repr(value)
    return _dumps_canonical(value)


_ip_json_cache: dict[str | None, str] = {}


def _ip_json(value: str | None) -> str:
    text = _ip_json_cache.get(value)
    if text is None:
        text = _nullable(normalize_ip(value))
        if len(_ip_json_cache) < 65536:  # addresses repeat; a flood of new ones must not grow it
            _ip_json_cache[value] = text
    return text


# Columns in the order `row_hash` takes them; verification selects exactly these.
ROW_COLUMNS = (*HASHED_FIELDS, "hash")


def row_hash(row: tuple[Any, ...]) -> str:
    """`event_hash` of a stored row in ROW_COLUMNS order (see `row_canonical`)."""
    return hashlib.sha256(row_canonical(row).encode()).hexdigest()


def row_canonical(row: tuple[Any, ...]) -> str:
    """The canonical JSON that `event_hash` covers, built from a stored row in ROW_COLUMNS
    order as the verifier reads it: created_at already as ISO 8601 text and data as its
    stored canonical JSON text.

    Spelled out by hand because verification runs it once per event: the text columns are
    never NULL so they go straight to the JSON string encoder, the keys are written in sorted
    order, and data is embedded as stored. Embedding it unparsed cannot be abused to forge an
    event: every other field is encoded here, and in that encoding a quote inside a value is
    always escaped, so the text around data cannot be shifted into a different set of fields.
    Stored data that is not the canonical text simply fails to match. tests/audit/test_chain.py
    holds this to `event_hash`.
    """
    actor_user_id, host_id, snapshot_id, age = row[3], row[8], row[10], row[12]
    return (
        f'{{"action":{_str(row[4])},"actor":{_str(row[2])},'
        f'"actor_user_id":{"null" if actor_user_id is None else actor_user_id},'
        f'"correlation_id":{_str(row[13])},'
        f'"created_at":{_str(row[1])},"data":{row[14]},'
        f'"host_id":{"null" if host_id is None else host_id},"host_label":{_str(row[9])},'
        f'"ip":{_ip_json(row[15])},'
        f'"prev_hash":{_str(row[17])},"seq":{row[0]},'
        f'"snapshot_age_seconds":{"null" if age is None else _nullable(age)},'
        f'"snapshot_digest":{_str(row[11])},'
        f'"snapshot_id":{"null" if snapshot_id is None else snapshot_id},'
        f'"target_id":{_str(row[6])},'
        f'"target_label":{_str(row[7])},"target_type":{_str(row[5])},'
        f'"user_agent":{_str(row[16])}}}'
    )
