"""What a change request or a decision names, found through the API: the deployment (by id,
or host and unit), the snapshot (latest, new, an id), the model, the unit's environment."""

from __future__ import annotations

from typing import Any, TextIO

import click

from . import output as out
from .context import client
from .exits import CliError, ExitCode
from .hosts import host_path


def find_deployment(deployment_id: int | None, host: str | None, unit: str | None) -> Any:
    if deployment_id is not None:
        if host or unit:
            raise click.UsageError("give --deployment, or --host (and --unit), not both")
        return client().get(f"deployments/{deployment_id}/")
    if not host:
        raise click.UsageError("name the deployment: --deployment ID, or --host NAME [--unit U]")
    found = [
        d
        for d in client().pages("deployments/", {"host": host})
        if unit is None or d["unit"] == unit
    ]
    if len(found) != 1:
        units = ", ".join(d["unit"] for d in found) or "none"
        raise CliError(
            f"{host} has {len(found)} deployments{' of ' + unit if unit else ''} ({units}); "
            "name one with --unit or --deployment",
            ExitCode.NOT_FOUND if not found else ExitCode.USAGE,
        )
    return found[0]


def resolve_snapshot(host: str, ref: str) -> Any:
    """The snapshot `ref` names, said on stderr so the person sees what they decide on."""
    if ref == "latest":
        snapshot = client().get(host_path(host, "snapshots", "latest"))
    elif ref == "new":
        snapshot = client().post(host_path(host, "snapshots"), long=True)
    elif ref.isdigit():
        snapshot = client().get(f"snapshots/{int(ref)}/")
    else:
        raise click.BadParameter(
            f"{ref!r}: use latest, new or a snapshot id", param_hint="--snapshot"
        )
    out.note(
        f"resting on snapshot #{snapshot['id']} of {snapshot['host']}: {snapshot['status']}, "
        f"{out.age(snapshot['age_seconds'])} old"
    )
    return snapshot


def find_model(ref: str) -> int:
    if ref.isdigit():
        return int(ref)
    models = list(client().pages("models/"))
    found = [
        m for m in models if ref in (m["served_name"], f"{m['name']}:{m['variant']}", m["path"])
    ]
    if len(found) != 1:
        known = ", ".join(
            f"{m['id']} ({m['name']}:{m['variant']}, {m['served_name']})" for m in models
        )
        raise CliError(f"{len(found)} models match {ref!r}; the catalog: {known}", ExitCode.USAGE)
    return int(found[0]["id"])


def read_environment(pairs: tuple[str, ...], env_file: TextIO | None) -> dict[str, str] | None:
    """--env pairs and --env-file lines (blank lines and # comments skipped); None: neither
    was given, and the server keeps the unit's environment as it is."""
    if not pairs and env_file is None:
        return None
    lines = [(f"--env {pair!r}", pair) for pair in pairs]
    if env_file is not None:
        for number, line in enumerate(env_file.read().splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                # The line itself may hold a secret: name it by its number only.
                lines.append((f"{env_file.name} line {number}", line))
    environment = {}
    for where, pair in lines:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise click.UsageError(f"{where} is not NAME=VALUE")
        environment[name.strip()] = value
    return environment
