"""The stream's record, schema `controlplane.audit/v1` (README.md here, field by field, and
controlplane.audit.v1.schema.json): an audit event exactly as it was hashed, plus a few fields
about it that the hash does not cover.

A receiver verifies a record by taking the fields in `HASHED_FIELDS`, writing them as canonical
JSON (keys sorted, no whitespace, UTF-8 unescaped) and comparing the SHA-256 with `hash`; and the
stream's continuity by checking that each record's `prev_hash` is the `hash` of the record with
the seq before it. Pure functions, no database.
"""

from __future__ import annotations

import enum
import hashlib
import json
from typing import Any

from controlplane.audit.actions import AuditAction
from controlplane.audit.chain import HASHED_FIELDS, row_canonical
from controlplane.canonical import canonical_json

SCHEMA = "controlplane.audit/v1"
# The fields outside the hash: what the stream says about an event, not the event.
ENVELOPE_FIELDS = ("schema", "hash", "severity", "redelivery", "identity", "data_omitted")


class Severity(enum.IntEnum):
    """RFC 5424's severities (6.2.1), the syslog PRI's low three bits."""

    EMERGENCY = 0
    ALERT = 1
    CRITICAL = 2
    ERROR = 3
    WARNING = 4
    NOTICE = 5
    INFORMATIONAL = 6
    DEBUG = 7

    @property
    def keyword(self) -> str:
        """The name syslog tools use (RFC 5424's keywords, as rsyslog's `severity-text`)."""
        return _KEYWORDS[self]


_KEYWORDS = {
    Severity.EMERGENCY: "emerg",
    Severity.ALERT: "alert",
    Severity.CRITICAL: "crit",
    Severity.ERROR: "err",
    Severity.WARNING: "warning",
    Severity.NOTICE: "notice",
    Severity.INFORMATIONAL: "info",
    Severity.DEBUG: "debug",
}

# What a SIEM should page on. Everything a person decided (requests, approvals, row changes,
# roles, tokens) is a notice, the default; routine observations are informational.
SEVERITY_BY_ACTION: dict[str, Severity] = {
    # the second-person rule was bypassed: someone should look now
    AuditAction.CHANGE_BREAK_GLASS: Severity.ALERT,
    # a host's SSH key changed (a rebuilt host, or someone in between); a sign-in failed; a
    # change did not end as asked; the SIEM feed to somewhere stopped
    AuditAction.HOST_KEY_CHANGED: Severity.WARNING,
    AuditAction.AUTH_LOGIN_FAILED: Severity.WARNING,
    AuditAction.CHANGE_FAILED: Severity.WARNING,
    AuditAction.CHANGE_ROLLED_BACK: Severity.WARNING,
    AuditAction.CHANGE_DRIFTED: Severity.WARNING,
    AuditAction.CHANGE_INTERRUPTED: Severity.WARNING,
    AuditAction.AUDIT_STREAM_REMOVED: Severity.WARNING,
    AuditAction.PROBE_COMPLETED: Severity.INFORMATIONAL,
    AuditAction.HOST_KEY_PRESENTED: Severity.INFORMATIONAL,
    AuditAction.HOST_JOURNAL_READ: Severity.INFORMATIONAL,
    AuditAction.AUTH_LOGIN: Severity.INFORMATIONAL,
    AuditAction.AUTH_LOGOUT: Severity.INFORMATIONAL,
    AuditAction.CHANGE_STARTED: Severity.INFORMATIONAL,
    AuditAction.CHANGE_STEP: Severity.INFORMATIONAL,
    AuditAction.CHANGE_SUCCEEDED: Severity.INFORMATIONAL,
}


def severity_of(action: str) -> Severity:
    return SEVERITY_BY_ACTION.get(action, Severity.NOTICE)


def identity_of(data: Any) -> dict[str, str] | None:
    """The identity provider's issuer and subject of the event's actor: `data.actor_identity`,
    which audit.services.record adds for every actor who signed in through the provider (or
    `data.identity` / `data.issuer` and `data.subject`, as an event about an identity names
    them)."""
    if not isinstance(data, dict):
        return None
    for holder in (data.get("actor_identity"), data.get("identity"), data):
        if isinstance(holder, dict):
            issuer, subject = holder.get("issuer"), holder.get("subject")
            if isinstance(issuer, str) and isinstance(subject, str) and issuer and subject:
                return {"issuer": issuer, "subject": subject}
    return None


def record_from_row(row: tuple[Any, ...], *, redelivery: bool) -> dict[str, Any]:
    """The record for a stored event, from its row in ROW_COLUMNS order (created_at as ISO
    text, data as its stored canonical JSON), exactly as verification reads it."""
    event: dict[str, Any] = json.loads(row_canonical(row))
    record = {
        "schema": SCHEMA,
        **event,
        "hash": row[18],
        "severity": severity_of(event["action"]).keyword,
        "redelivery": redelivery,
    }
    identity = identity_of(event["data"])
    if identity is not None:
        record["identity"] = identity
    return record


def without_data(record: dict[str, Any]) -> dict[str, Any]:
    """The record with `data` left out, for a receiver that cannot take it whole (syslog's
    message size): `data_omitted` says how big it was and its SHA-256, the links (`prev_hash`,
    `hash`) still show continuity, and the full event is in the control plane's export."""
    text = canonical_json(record["data"]).encode()
    return {
        **record,
        "data": None,
        "data_omitted": {"bytes": len(text), "sha256": hashlib.sha256(text).hexdigest()},
    }


def jsonl_line(record: dict[str, Any]) -> bytes:
    """One line of JSON Lines: canonical JSON (UTF-8, keys sorted) and a newline."""
    return canonical_json(record).encode() + b"\n"


def ascii_json(record: dict[str, Any]) -> str:
    """Canonical JSON with every non-ASCII character escaped: the same values, in text a
    syslog MSG carries without a BOM (RFC 5424 6.4) and no receiver re-encodes."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def hash_of(record: dict[str, Any]) -> str:
    """What a receiver computes to check a record: SHA-256 over the hashed fields' canonical
    JSON. Equal to `record["hash"]` for an event as it was written."""
    hashed = {name: record[name] for name in HASHED_FIELDS}
    return hashlib.sha256(canonical_json(hashed).encode()).hexdigest()
