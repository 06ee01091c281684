"""cpctl audit: search (the history page's filters), export (CSV or JSON Lines), verify."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from . import output as out
from .context import client, json_option, wants_json
from .exits import ExitCode

# The history page's filters, as the API takes them (controlplane.audit.forms.EventFilterForm):
# the server parses and checks each one.
FILTERS = (
    ("action", 'Exact, or a prefix ending in "." or "*".'),
    ("actor", "A user name or a system actor, exactly."),
    ("host", "A host's name or id."),
    ("target", '"type:id" (hosts.host:3) or part of a label.'),
    ("since", "From this time (UTC), e.g. 2026-12-01T09:00."),
    ("until", "Before this time (UTC)."),
    ("text", "Free text over names, labels and data."),
    ("correlation", "One request's or change's events."),
)
NAMES = frozenset(name for name, _ in FILTERS)


F = TypeVar("F", bound=Callable[..., Any])


def filter_options(f: F) -> F:
    for name, text in reversed(FILTERS):
        f = click.option(f"--{name}", help=text)(f)
    return f


def chosen(filters: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in filters.items() if k in NAMES and v}


@click.group()
def audit() -> None:
    """The audit log: search it, export it, verify its hash chain."""


@audit.command("search")
@filter_options
@click.option("--limit", type=click.IntRange(1), default=50, show_default=True)
@json_option
def audit_search(limit: int, **filters: Any) -> None:
    """Events, newest first, matching every filter given."""
    params = {**chosen(filters), "page_size": min(limit, 200)}
    rows = list(client().pages("audit/events/", params, limit=limit))
    if wants_json():
        out.emit_json(rows)
        return
    out.table(
        [
            [
                e["seq"],
                out.when(e["created_at"]),
                e["actor"],
                e["action"],
                e["target_label"],
                e["host_label"],
                e["correlation_id"],
            ]
            for e in rows
        ],
        ["SEQ", "TIME", "ACTOR", "ACTION", "TARGET", "HOST", "CORRELATION"],
    )


@audit.command("export")
@filter_options
@click.option(
    "--format",
    "kind",
    type=click.Choice(["jsonl", "csv"]),
    default="jsonl",
    show_default=True,
    help="jsonl: each event's canonical JSON and hash.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file (default: stdout).",
)
def audit_export(kind: str, output: Path | None, **filters: Any) -> None:
    """Matching events, oldest first, streamed as the server writes them."""
    chunks = client().stream("audit/export/", {**chosen(filters), "format": kind})
    if output is None:
        sink = sys.stdout.buffer
        for chunk in chunks:
            sink.write(chunk)
        sink.flush()
        return
    written = 0
    with output.open("wb") as handle:
        for chunk in chunks:
            handle.write(chunk)
            written += len(chunk)
    out.note(f"wrote {written} bytes to {output}")


@audit.command("verify")
@json_option
def audit_verify() -> int:
    """Walk the hash chain and the signed checkpoints now (as `manage.py verify_audit`).
    Exits 8 when the log was altered, naming the first broken sequence number."""
    result = client().get("audit/verify/")
    if wants_json():
        out.emit_json(result)
    else:
        click.echo(result["summary"])
    return ExitCode.OK if result["ok"] else ExitCode.FAILED
