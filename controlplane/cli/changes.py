"""cpctl changes: list, show, request (every kind), approve, reject, break-glass, cancel, watch.

Each decision is one API call; the server applies every rule (roles, the two-person rule,
freshness of the snapshot named, fit, one job per host) and its refusal is printed as it is.
"""

from __future__ import annotations

from typing import Any, TextIO

import click

from . import output as out
from .context import client, json_option, wants_json
from .exits import CliError, ExitCode
from .targets import find_deployment, resolve_snapshot, shaping_fields, shaping_options
from .watch import drift_lines, step_line, watch

# For completion and help only: the server decides which kinds exist (an unknown one is its 400).
KINDS = ["stop", "start", "restart", "redeploy", "model_swap", "rollback", "engine_repair"]


def snapshot_option(f: Any) -> Any:
    return click.option(
        "--snapshot",
        "snapshot_ref",
        required=True,
        metavar="latest|new|ID",
        help="The snapshot this decision rests on: the host's newest (latest), one taken now "
        "(new; needs the operator or approver role), or an id. The server checks it is fresh.",
    )(f)


def watch_options(f: Any) -> Any:
    f = click.option("--timeout", type=float, help="Stop watching after this many seconds.")(f)
    f = click.option(
        "--interval", type=float, default=1.0, show_default=True, help="Seconds between polls."
    )(f)
    return f


def reason_option(f: Any) -> Any:
    return click.option("--reason", required=True, help="Why, in words (audited).")(f)


def drain_options(f: Any) -> Any:
    """Drain first: a hook an administrator keeps, by name (the server lists them at
    /api/v1/drain-hooks/), and how long to wait for the requests in flight."""
    f = click.option(
        "--drain-deadline",
        type=int,
        metavar="SECONDS",
        help="With --drain-hook: how long to wait for the requests in flight (server default 300).",
    )(f)
    return click.option(
        "--drain-hook", metavar="NAME", help="Drain first with this hook (its name)."
    )(f)


@click.group()
def changes() -> None:
    """Change requests: request, decide, follow."""


@changes.command("list")
@click.option("--status", help="Only changes in this status, e.g. pending_approval.")
@click.option("--host", help="Only this host's.")
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True)
@json_option
def changes_list(status: str | None, host: str | None, limit: int) -> None:
    """Change requests, newest first."""
    params = {k: v for k, v in (("status", status), ("host", host)) if v}
    rows = list(client().pages("changes/", params, limit=limit))
    if wants_json():
        out.emit_json(rows)
        return
    out.table(
        [
            [
                c["id"],
                c["host"],
                c["unit"],
                c["kind"],
                c["status"],
                c["requested_by"],
                out.when(c["created_at"]),
                c["reason"][:40],
            ]
            for c in rows
        ],
        ["CHANGE", "HOST", "UNIT", "KIND", "STATUS", "BY", "CREATED", "REASON"],
    )


@changes.command("show")
@click.argument("change_id", type=int)
@json_option
def changes_show(change_id: int) -> None:
    """One change: its status, steps, approvals and drift report."""
    show(client().get(f"changes/{change_id}/"))


def show(change: dict[str, Any]) -> None:
    if wants_json():
        out.emit_json(change)
        return
    out.fields(
        [
            ("change", f"#{change['id']} {change['kind']} of {change['unit']} on {change['host']}"),
            (
                "status",
                change["status"]
                + (f": {change['status_reason']}" if change.get("status_reason") else ""),
            ),
            ("reason", change["reason"]),
            ("requested by", f"{change['requested_by']} at {out.when(change['created_at'])}"),
            ("rests on", f"snapshot #{change['snapshot_id']}"),
            ("needs approval", change["needs_approval"]),
            ("correlation", change.get("correlation_id")),
        ]
    )
    for approval in change.get("approvals") or []:
        click.echo(
            f"{approval['decision']} by {approval['approver']} on snapshot "
            f"#{approval['snapshot_id']}: {approval['reason']}"
        )
    for line in drift_lines(change):
        click.echo(line)
    for step in change.get("steps") or []:
        click.echo(step_line(step))


@changes.command("request")
@click.argument(
    "kind",
    shell_complete=lambda ctx, param, incomplete: [k for k in KINDS if k.startswith(incomplete)],
)
@click.option("--deployment", "deployment_id", type=int, help="The deployment's id.")
@click.option("--host", help="The host (instead of --deployment) ...")
@click.option("--unit", help="... and its unit, if it has more than one deployment.")
@snapshot_option
@reason_option
@shaping_options("The unit's Environment= variables (repeat; omitted: kept as they are).")
@click.option("--acknowledge-busy", is_flag=True, help="Go ahead although requests are in flight.")
@click.option(
    "--acknowledge-unknown",
    is_flag=True,
    help="stop/restart on a partial snapshot: accept what it could not read.",
)
@click.option(
    "--acknowledge-integrity",
    is_flag=True,
    help="Go ahead although the engine's integrity check is not clean.",
)
@click.option("--benchmark", is_flag=True, help="Benchmark before and after (default profile).")
@click.option("--benchmark-profile", type=int, help="Benchmark with this profile's id.")
@click.option(
    "--revision", type=int, metavar="N", help="A rollback's target: revision N (default: one back)."
)
@drain_options
@click.option("--watch", "follow", is_flag=True, help="Then follow it until it ends.")
@watch_options
@json_option
def changes_request(
    kind: str,
    deployment_id: int | None,
    host: str | None,
    unit: str | None,
    snapshot_ref: str,
    reason: str,
    model: str | None,
    tensor_parallel_size: int | None,
    max_model_len: int | None,
    extra_args: tuple[str, ...],
    clear_extra_args: bool,
    environment: tuple[str, ...],
    env_file: TextIO | None,
    acknowledge_busy: bool,
    acknowledge_unknown: bool,
    acknowledge_integrity: bool,
    benchmark: bool,
    benchmark_profile: int | None,
    revision: int | None,
    drain_hook: str | None,
    drain_deadline: int | None,
    follow: bool,
    interval: float,
    timeout: float | None,
) -> int:
    """Request a change of KIND (stop, start, restart, redeploy, model_swap, rollback,
    engine_repair) on a deployment, resting on a snapshot of its host."""
    deployment = find_deployment(deployment_id, host, unit)
    snapshot = resolve_snapshot(deployment["host"], snapshot_ref)
    body: dict[str, Any] = {
        "deployment_id": deployment["id"],
        "kind": kind.replace("-", "_"),
        "snapshot_id": snapshot["id"],
        "reason": reason,
        "acknowledge_busy": acknowledge_busy,
        "acknowledge_unknown": acknowledge_unknown,
        "acknowledge_integrity": acknowledge_integrity,
        "benchmark": benchmark,
    }
    optional = {
        **shaping_fields(
            model=model,
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=max_model_len,
            extra_args=extra_args,
            clear_extra_args=clear_extra_args,
            environment=environment,
            env_file=env_file,
        ),
        "benchmark_profile_id": benchmark_profile,
        "revision": revision,
        "drain_hook": drain_hook,
        "drain_deadline_seconds": drain_deadline,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    change = client().post("changes/", body)
    return decided(change, follow=follow, interval=interval, timeout=timeout)


@changes.command("approve")
@click.argument("change_id", type=int)
@snapshot_option
@reason_option
@click.option("--watch", "follow", is_flag=True, help="Then follow it until it ends.")
@watch_options
@json_option
def changes_approve(
    change_id: int,
    snapshot_ref: str,
    reason: str,
    follow: bool,
    interval: float,
    timeout: float | None,
) -> int:
    """Approve a change on the snapshot you reviewed (not your own: the two-person rule)."""
    return decide(change_id, "approve", snapshot_ref, reason, follow, interval, timeout)


@changes.command("break-glass")
@click.argument("change_id", type=int)
@snapshot_option
@reason_option
@click.option("--watch", "follow", is_flag=True, help="Then follow it until it ends.")
@watch_options
@json_option
def changes_break_glass(
    change_id: int,
    snapshot_ref: str,
    reason: str,
    follow: bool,
    interval: float,
    timeout: float | None,
) -> int:
    """Administrators: queue a change without a second person (alerted and audited)."""
    return decide(change_id, "break-glass", snapshot_ref, reason, follow, interval, timeout)


def decide(
    change_id: int,
    action: str,
    snapshot_ref: str,
    reason: str,
    follow: bool,
    interval: float,
    timeout: float | None,
) -> int:
    change = client().get(f"changes/{change_id}/")
    snapshot = resolve_snapshot(change["host"], snapshot_ref)
    body = {"snapshot_id": snapshot["id"], "reason": reason}
    try:
        decided_change = client().post(f"changes/{change_id}/{action}/", body)
    except CliError as exc:
        # The host changed since the request: the change is now drifted; show what differs.
        if exc.code == ExitCode.DRIFT and isinstance(exc.body, dict) and not wants_json():
            exc.message += "\n" + "\n".join(drift_lines(exc.body.get("change") or {}))
        raise
    return decided(decided_change, follow=follow, interval=interval, timeout=timeout)


@changes.command("reject")
@click.argument("change_id", type=int)
@reason_option
@json_option
def changes_reject(change_id: int, reason: str) -> None:
    """Reject a change waiting for approval."""
    show(client().post(f"changes/{change_id}/reject/", {"reason": reason}))


@changes.command("cancel")
@click.argument("change_id", type=int)
@json_option
def changes_cancel(change_id: int) -> None:
    """Withdraw a waiting change, or ask a running job to stop."""
    show(client().post(f"changes/{change_id}/cancel/"))


@changes.command("watch")
@click.argument("change_id", type=int)
@watch_options
@json_option
def changes_watch(change_id: int, interval: float, timeout: float | None) -> int:
    """Follow a change until it ends, printing its steps as they happen. Exits 0 when it
    succeeded, 7 drifted, 8 failed/rolled back/interrupted, 5 rejected/cancelled, 9 when
    --timeout passed first."""
    change, code = watch(
        client(), change_id, interval=interval, timeout=timeout, quiet=wants_json()
    )
    finish(change)
    return code


def decided(change: dict[str, Any], *, follow: bool, interval: float, timeout: float | None) -> int:
    if not follow:
        if wants_json():
            out.emit_json(change)
        else:
            next_step = {"pending_approval": "waiting for a second person's approval"}
            click.echo(
                f"change #{change['id']} {change['kind']} on {change['host']}: "
                f"{next_step.get(change['status'], change['status'])}"
            )
        return ExitCode.OK
    final, code = watch(
        client(), change["id"], interval=interval, timeout=timeout, quiet=wants_json()
    )
    finish(final)
    return code


def finish(change: dict[str, Any]) -> None:
    if wants_json():
        out.emit_json(change)
        return
    for line in drift_lines(change):
        click.echo(line)
