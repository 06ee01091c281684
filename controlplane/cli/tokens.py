"""cpctl tokens: your own API tokens. A new token's secret is printed once, alone on stdout
(what a script captures), and never again."""

from __future__ import annotations

import click

from . import output as out
from .context import client, json_option, wants_json


@click.group()
def tokens() -> None:
    """Your API tokens: list, create, revoke."""


@tokens.command("list")
@json_option
def tokens_list() -> None:
    """Your tokens, newest first (their prefixes, never their secrets)."""
    rows = list(client().pages("me/tokens/"))
    if wants_json():
        out.emit_json(rows)
        return
    out.table(
        [
            [
                t["id"],
                t["name"],
                f"{t['prefix']}…",
                t["state"],
                out.when(t["created_at"]),
                out.when(t["last_used_at"]),
                out.when(t["expires_at"]),
            ]
            for t in rows
        ],
        ["ID", "NAME", "PREFIX", "STATE", "CREATED", "LAST USED", "EXPIRES"],
    )


@tokens.command("create")
@click.argument("name")
@click.option("--expires-in-days", type=int, help="Default: never (revoke it when done).")
@json_option
def tokens_create(name: str, expires_in_days: int | None) -> None:
    """Create a token for yourself; prints its secret this once."""
    issued = client().post("me/tokens/", {"name": name, "expires_in_days": expires_in_days})
    if wants_json():
        out.emit_json(issued)
        return
    expires = out.when(issued["expires_at"]) if issued["expires_at"] else "never"
    out.note(
        f"token #{issued['id']} {issued['name']} ({issued['prefix']}…), expires {expires}. "
        "Its secret follows, shown this once: keep it in CPCTL_TOKEN or a file only you "
        "can read."
    )
    click.echo(issued["secret"])


@tokens.command("revoke")
@click.argument("token_id", type=int)
@json_option
def tokens_revoke(token_id: int) -> None:
    """Revoke one of your tokens (it stops working at once)."""
    token = client().post(f"me/tokens/{token_id}/revoke/")
    if wants_json():
        out.emit_json(token)
    else:
        click.echo(f"token #{token['id']} {token['name']} ({token['prefix']}…): {token['state']}")
