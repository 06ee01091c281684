"""What cpctl prints: tables for people (tabulate), the API's JSON unchanged for scripts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

import click
from tabulate import tabulate

# An ISO 8601 timestamp: to the second, a fraction (dropped), the zone.
TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?")


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str]) -> None:
    rows = [[cell(v) for v in row] for row in rows]
    if not rows:
        click.echo("(none)")
        return
    click.echo(tabulate(rows, headers=list(headers), tablefmt="simple", disable_numparse=True))


def fields(pairs: Iterable[tuple[str, Any]]) -> None:
    """A record as `name  value` lines."""
    rows = [[name, cell(value)] for name, value in pairs]
    click.echo(tabulate(rows, tablefmt="plain", disable_numparse=True))


def note(text: str) -> None:
    """For the person at the terminal; stderr, so a script reading stdout is not disturbed."""
    click.echo(text, err=True)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(cell(v) for v in value) or "-"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def when(value: str | None) -> str:
    """An API timestamp (ISO 8601, UTC) to the second."""
    if not value:
        return "-"
    found = TIMESTAMP.fullmatch(value)
    if found is None:
        return value
    seconds, zone = found.groups()
    # DRF writes UTC as "Z", a serializer's own isoformat() as "+00:00": both are said as Z.
    return seconds.replace("T", " ") + ("Z" if zone in ("Z", "+00:00") else zone or "")


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
