"""The engine integrity check's JSON report."""

from __future__ import annotations

import json
from typing import Any

from ..state import (
    IntegrityReport,
)
from .common import (
    ParseError,
    excerpt,
)


def _str_list(payload: dict[str, Any], key: str) -> list[str]:
    value = payload.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ParseError(f"integrity {key!r} is not a list of paths")
    return value


def _integrity_from(payload: dict[str, Any]) -> IntegrityReport:
    dist, version = payload.get("dist"), payload.get("version")
    if "error" in payload:
        return IntegrityReport(
            dist=dist if isinstance(dist, str) else None, error=str(payload["error"])
        )
    checked = payload.get("checked")
    if not (isinstance(dist, str) and isinstance(version, str) and isinstance(checked, int)):
        raise ParseError("integrity report lacks dist, version or checked")
    if isinstance(checked, bool):
        raise ParseError(f"integrity 'checked' is not a count: {checked!r}")
    return IntegrityReport(
        dist=dist,
        version=version,
        checked=checked,
        modified=_str_list(payload, "modified"),
        missing=_str_list(payload, "missing"),
        added=_str_list(payload, "added"),
    )


def parse_integrity(text: str) -> IntegrityReport:
    """The JSON line of commands.INTEGRITY_SCRIPT. Never raises: unreadable output (a Python
    traceback, a missing interpreter) becomes a report with `error` set to its telling line.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):  # warnings may precede the report
        if not line.startswith("{"):
            continue
        try:
            payload = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(payload, dict):
            try:
                return _integrity_from(payload)
            except ParseError as exc:
                return IntegrityReport(error=str(exc))
    if not lines:
        return IntegrityReport(error="no output")
    # A traceback's last line names the exception; a shell error is its only line.
    return IntegrityReport(error=excerpt(lines[-1]))
