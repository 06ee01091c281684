"""cpctl rollouts: changes to many hosts in waves, once the server has them.

The seam: rollouts live under /api/v1/rollouts/, built beside this client. A server without
them answers that path with Django's plain 404 page rather than the API's JSON, which the
client reads as "no such endpoint" (`client.Client._error`); this group says it in words.
Until the rollout API is merged its fields are not known here, so the tables show the common
ones present and --json shows everything.
"""

from __future__ import annotations

from typing import Any

import click

from . import output as out
from .context import client, json_option, wants_json
from .exits import CliError

PATH = "rollouts/"
COLUMNS = ["id", "name", "kind", "status", "wave", "hosts", "created_by", "created_at"]


def no_rollouts(exc: CliError) -> CliError:
    if isinstance(exc.body, dict) and exc.body.get("code") == "no_endpoint":
        exc.message = "this server has no rollouts (no /api/v1/rollouts/): it predates them"
    return exc


@click.group()
def rollouts() -> None:
    """Rollouts: one change to many hosts in waves (servers that have them)."""


@rollouts.command("list")
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True)
@json_option
def rollouts_list(limit: int) -> None:
    """Rollouts, as the server lists them."""
    try:
        rows = list(client().pages(PATH, limit=limit))
    except CliError as exc:
        raise no_rollouts(exc) from None
    if wants_json():
        out.emit_json(rows)
        return
    columns = [c for c in COLUMNS if any(c in r for r in rows)] or ["id"]
    out.table([[r.get(c) for c in columns] for r in rows], [c.upper() for c in columns])


@rollouts.command("show")
@click.argument("rollout_id", type=int)
@json_option
def rollouts_show(rollout_id: int) -> None:
    """One rollout."""
    try:
        rollout: dict[str, Any] = client().get(f"{PATH}{rollout_id}/")
    except CliError as exc:
        raise no_rollouts(exc) from None
    if wants_json():
        out.emit_json(rollout)
        return
    out.fields((k, v) for k, v in rollout.items() if not isinstance(v, list | dict))
