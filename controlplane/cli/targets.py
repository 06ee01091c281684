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


def shaping_options(env_help: str) -> Any:
    """What a model swap or a redeploy may reshape, as options (`changes request` and
    `rollouts create`): the model, the parallelism, the context length, engine arguments and the
    unit's environment, values that must not be on the command line from a file."""

    def decorate(f: Any) -> Any:
        for option in reversed(
            [
                click.option(
                    "--model",
                    help="model_swap: the model to swap to (id, served name, or NAME:VARIANT).",
                ),
                click.option("--tensor-parallel-size", type=int),
                click.option("--max-model-len", type=int),
                click.option(
                    "--extra-arg",
                    "extra_args",
                    multiple=True,
                    help="An engine argument, as the engine reads it (repeat; --extra-arg=--flag).",
                ),
                click.option(
                    "--clear-extra-args", is_flag=True, help="Serve with no extra engine arguments."
                ),
                click.option(
                    "--env", "environment", multiple=True, metavar="NAME=VALUE", help=env_help
                ),
                click.option(
                    "--env-file",
                    type=click.File("r"),
                    help="NAME=VALUE lines, for values that must not be on the command line.",
                ),
            ]
        ):
            f = option(f)
        return f

    return decorate


def shaping_fields(
    *,
    model: str | None,
    tensor_parallel_size: int | None,
    max_model_len: int | None,
    extra_args: tuple[str, ...],
    clear_extra_args: bool,
    environment: tuple[str, ...],
    env_file: TextIO | None,
) -> dict[str, Any]:
    """The request body's fields for shaping_options (None where not given)."""
    return {
        "model_id": find_model(model) if model else None,
        "tensor_parallel_size": tensor_parallel_size,
        "max_model_len": max_model_len,
        "extra_args": [] if clear_extra_args else (list(extra_args) or None),
        "environment": read_environment(environment, env_file),
    }
