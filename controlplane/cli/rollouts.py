"""cpctl rollouts: list, show, create, approve, reject, pause, resume, abort, watch.

One change across many hosts in waves (/api/v1/rollouts/). As for changes, each decision is
one API call and every rule is the server's (the operator role on every host to request, the
two-person rule, one approval bound to what each host serves, who may pause or abort); its
refusal is printed as it is. A server that predates rollouts answers their paths with Django's
plain 404 page rather than the API's JSON, which the client reads as "no such endpoint"
(`client.Client._error`); these commands say it in words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import click

from . import output as out
from .changes import drain_options, reason_option, watch_options
from .context import client, json_option, wants_json
from .exits import CliError, ExitCode
from .rollout_watch import (
    host_detail,
    host_line,
    hosts_count,
    status_text,
    title,
    watch,
    wave_label,
    what,
)
from .targets import shaping_fields, shaping_options

PATH = "rollouts/"
# For completion and help only: the server decides which kinds a rollout may carry.
KINDS = ["model_swap", "redeploy", "engine_repair", "restart"]
STATUSES = [
    "pending_approval", "rejected", "approved", "running", "paused", "halting", "halted",
    "succeeded", "aborted", "failed",
]  # fmt: skip


def no_rollouts(exc: CliError) -> CliError:
    if isinstance(exc.body, dict) and exc.body.get("code") == "no_endpoint":
        exc.message = "this server has no rollouts (no /api/v1/rollouts/): it predates them"
    return exc


@contextmanager
def rollouts_api() -> Iterator[None]:
    """Around calls to the rollout endpoints (only those: a missing models/ is not this)."""
    try:
        yield
    except CliError as exc:
        raise no_rollouts(exc) from None


class WaveSize(click.ParamType):
    """`2` (hosts per wave after the canary) or `25%` (of all the rollout's hosts). Whether
    the number is in range is the server's to say."""

    name = "N|N%"

    def convert(self, value: Any, param: Any, ctx: Any) -> tuple[int, str]:
        if isinstance(value, tuple):
            return value
        found = re.fullmatch(r"\s*(-?\d{1,9})\s*(%?)\s*", str(value))
        if found is None:
            self.fail(f"{value!r}: a number of hosts (2) or a percentage of them (25%)", param)
        return int(found.group(1)), "percent" if found.group(2) else "hosts"


@click.group()
def rollouts() -> None:
    """Rollouts: one change to many hosts in waves, a canary first."""


# --- reading -----------------------------------------------------------------------------------


@rollouts.command("list")
@click.option(
    "--status",
    help="Only rollouts in this status, e.g. running.",
    shell_complete=lambda ctx, param, incomplete: [s for s in STATUSES if s.startswith(incomplete)],
)
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True)
@json_option
def rollouts_list(status: str | None, limit: int) -> None:
    """Rollouts, newest first."""
    with rollouts_api():
        rows = list(client().pages(PATH, {"status": status} if status else None, limit=limit))
    if wants_json():
        out.emit_json(rows)
        return
    out.table(
        [
            [
                r["id"],
                r["kind"],
                r.get("model"),
                r["status"],
                wave_cell(r),
                hosts_cell(r),
                r["requested_by_name"],
                out.when(r["created_at"]),
                r["reason"][:40],
            ]
            for r in rows
        ],
        ["ROLLOUT", "KIND", "MODEL", "STATUS", "WAVE", "HOSTS", "BY", "CREATED", "REASON"],
    )


def wave_cell(rollout: dict[str, Any]) -> str:
    """The wave it is in, counting the canary as the first, of how many."""
    now = rollout["current_wave"] + 1 if rollout.get("started_at") else "-"
    return f"{now}/{rollout['waves']}"


def hosts_cell(rollout: dict[str, Any]) -> str:
    count = len(rollout.get("hosts") or [])
    group = rollout.get("host_group_name")
    return f"{count} ({group})" if group else str(count)


@rollouts.command("show")
@click.argument("rollout_id", type=int)
@json_option
def rollouts_show(rollout_id: int) -> None:
    """One rollout: how it goes, its approval, and each wave's hosts with their state, why a
    host was skipped, the check it failed, and its change."""
    with rollouts_api():
        show(client().get(f"{PATH}{rollout_id}/"))


def show(rollout: dict[str, Any]) -> None:
    if wants_json():
        out.emit_json(rollout)
        return
    out.fields(
        [
            ("rollout", f"#{rollout['id']} {what(rollout)}"),
            ("status", status_text(rollout)),
            ("reason", rollout["reason"]),
            (
                "requested by",
                f"{rollout['requested_by_name']} at {out.when(rollout['created_at'])}",
            ),
            ("approval", approval_text(rollout.get("approval"))),
            ("hosts", hosts_text(rollout)),
            ("waves", waves_text(rollout)),
            ("max down", f"{hosts_count(rollout['max_down'])} changing at once"),
            ("benchmark", benchmark_text(rollout)),
            ("deadline", f"halts after {rollout['progress_deadline_seconds']} s without progress"),
            ("shaping", shaping_text(rollout)),
            ("started", out.when(rollout.get("started_at"))),
            ("finished", out.when(rollout.get("finished_at"))),
            ("page", client().config.url + rollout["link"] if rollout.get("link") else None),
        ]
    )
    click.echo()
    hosts = sorted(rollout.get("hosts") or [], key=lambda h: h["wave"])
    out.table(
        [
            [
                wave_label(h["wave"]),
                h["host"],
                h["unit"],
                h["status"],
                f"#{h['change']}" if h.get("change") is not None else None,
                f"#{h['rollback_change']}" if h.get("rollback_change") is not None else None,
                h.get("gate_check") or None,
                host_detail(h) or None,
            ]
            for h in hosts
        ],
        ["WAVE", "HOST", "UNIT", "STATUS", "CHANGE", "ROLLBACK", "CHECK", "DETAIL"],
    )


def approval_text(approval: dict[str, Any] | None) -> str:
    if not approval:
        return "-"
    text = (
        f"{approval['decision']} by {approval['approver']} at "
        f"{out.when(approval['created_at'])}: {approval['reason']}"
    )
    if approval.get("expires_at"):
        text += f" (to start by {out.when(approval['expires_at'])})"
    return text


def hosts_text(rollout: dict[str, Any]) -> str:
    count = len(rollout.get("hosts") or [])
    unit = rollout.get("unit") or "each host's one deployment"
    group = rollout.get("host_group_name")
    chosen = f"the hosts of group {group} when requested" if group else "the hosts named"
    return f"{count}, {chosen}; unit: {unit}"


def waves_text(rollout: dict[str, Any]) -> str:
    per = (
        f"{rollout['wave_size']} % of the hosts"
        if rollout["wave_unit"] == "percent"
        else hosts_count(rollout["wave_size"])
    )
    text = f"{rollout['waves']}: the canary, then {per} per wave"
    if rollout.get("started_at") and not rollout.get("finished_at"):
        text += f"; now {wave_label(rollout['current_wave'])}"
    return text


def benchmark_text(rollout: dict[str, Any]) -> str:
    if not rollout.get("benchmark"):
        return "none (the coherence suite only)"
    floor = 100 - rollout["benchmark_margin_pct"]
    return f"{rollout['benchmark']}: each host at least {floor} % of its own baseline"


def shaping_text(rollout: dict[str, Any]) -> str:
    said = []
    for name, label in (("tensor_parallel_size", "tp"), ("max_model_len", "max model len")):
        if rollout.get(name) is not None:
            said.append(f"{label} {rollout[name]}")
    if rollout.get("extra_args") is not None:
        said.append(f"extra args: {' '.join(rollout['extra_args']) or 'none'}")
    if rollout.get("environment") is not None:
        # Names only: the values may be secrets (--json has them, as the API gives them).
        said.append(f"environment: {', '.join(sorted(rollout['environment'])) or 'none'}")
    if rollout.get("acknowledge_busy"):
        said.append("hosts may be busy")
    return "; ".join(said) or "-"


# --- requesting --------------------------------------------------------------------------------


@rollouts.command("create")
@click.argument(
    "kind",
    shell_complete=lambda ctx, param, incomplete: [k for k in KINDS if k.startswith(incomplete)],
)
@click.option("--host", "host_names", multiple=True, metavar="NAME", help="A host (repeat), or ...")
@click.option(
    "--hosts-file",
    type=click.File("r"),
    help="... host names, one a line (# comments), or ...",
)
@click.option("--host-group", help="... every host of this group, as it is now.")
@click.option("--unit", help="Each host's deployment of this unit (default: its only one).")
@shaping_options("The unit's Environment= variables (repeat; omitted: each host keeps its own).")
@click.option(
    "--wave-size",
    type=WaveSize(),
    default="1",
    show_default=True,
    help="After the canary (one host, alone): hosts per wave (2), or a share of them (25%).",
)
@click.option(
    "--max-down", type=int, default=1, show_default=True, help="At most this many hosts changing "
    "at once.",
)  # fmt: skip
@click.option("--benchmark", is_flag=True, help="Benchmark each host before and after its change.")
@click.option("--benchmark-profile", type=int, help="... with this profile's id (default: the "
              "default profile).")  # fmt: skip
@click.option(
    "--benchmark-margin",
    type=int,
    help="A host passes when its throughput is at least 100 - this % of its baseline "
    "(server default 10).",
)
@click.option(
    "--progress-deadline",
    type=int,
    metavar="SECONDS",
    help="Halt (and roll the wave back) when no host finishes its turn for this long "
    "(server default 1800).",
)
@click.option(
    "--acknowledge-busy", is_flag=True, help="Hosts may be serving: their changes drop requests."
)
@drain_options
@reason_option
@json_option
def rollouts_create(
    kind: str,
    host_names: tuple[str, ...],
    hosts_file: TextIO | None,
    host_group: str | None,
    unit: str | None,
    model: str | None,
    tensor_parallel_size: int | None,
    max_model_len: int | None,
    extra_args: tuple[str, ...],
    clear_extra_args: bool,
    environment: tuple[str, ...],
    env_file: TextIO | None,
    wave_size: tuple[int, str],
    max_down: int,
    benchmark: bool,
    benchmark_profile: int | None,
    benchmark_margin: int | None,
    progress_deadline: int | None,
    acknowledge_busy: bool,
    drain_hook: str | None,
    drain_deadline: int | None,
    reason: str,
) -> None:
    """Request a rollout of KIND (model_swap, redeploy, engine_repair, restart) across hosts, in
    waves. It waits for one approval by a second person (`cpctl rollouts approve`)."""
    names = read_hosts(host_names, hosts_file)
    if (names is None) == (host_group is None):
        raise click.UsageError("name the hosts: --host (or --hosts-file), or --host-group")
    size, wave_unit = wave_size
    body: dict[str, Any] = {
        "kind": kind.replace("-", "_"),
        "reason": reason,
        "wave_size": size,
        "wave_unit": wave_unit,
        "max_down": max_down,
        "benchmark": benchmark,
        "acknowledge_busy": acknowledge_busy,
    }
    optional = {
        "hosts": names,
        "host_group": host_group,
        "unit": unit,
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
        "benchmark_margin_pct": benchmark_margin,
        "progress_deadline_seconds": progress_deadline,
        "drain_hook": drain_hook,
        "drain_deadline_seconds": drain_deadline,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    with rollouts_api():
        rollout = client().post(PATH, body)
    if wants_json():
        out.emit_json(rollout)
        return
    click.echo(f"{title(rollout)}: waiting for a second person's approval")
    for line in wave_plan(rollout):
        click.echo(line)


def read_hosts(names: tuple[str, ...], hosts_file: TextIO | None) -> list[str] | None:
    """--host names and --hosts-file lines; None: neither was given."""
    if not names and hosts_file is None:
        return None
    found = list(names)
    if hosts_file is not None:
        for line in hosts_file.read().splitlines():
            name = line.split("#", 1)[0].strip()
            if name:
                found.append(name)
    return found


def wave_plan(rollout: dict[str, Any]) -> Iterator[str]:
    hosts = rollout.get("hosts") or []
    for wave in sorted({h["wave"] for h in hosts}):
        names = ", ".join(h["host"] for h in hosts if h["wave"] == wave)
        yield f"  {wave_label(wave)}: {names}"


# --- deciding ----------------------------------------------------------------------------------


def follow_options(f: Any) -> Any:
    f = watch_options(f)
    return click.option("--watch", "follow", is_flag=True, help="Then follow it until it ends.")(f)


@rollouts.command("approve")
@click.argument("rollout_id", type=int)
@reason_option
@follow_options
@json_option
def rollouts_approve(
    rollout_id: int, reason: str, follow: bool, interval: float, timeout: float | None
) -> int:
    """Approve a rollout for every host it names, on what each serves now (its newest snapshot,
    which must be fresh; a host without one is skipped). Not your own: the two-person rule."""
    return decide(rollout_id, "approve", reason, follow=follow, interval=interval, timeout=timeout)


@rollouts.command("reject")
@click.argument("rollout_id", type=int)
@reason_option
@json_option
def rollouts_reject(rollout_id: int, reason: str) -> int:
    """Reject a rollout waiting for approval."""
    return decide(rollout_id, "reject", reason)


@rollouts.command("pause")
@click.argument("rollout_id", type=int)
@click.option("--reason", default="", help="Why (audited; default: paused by you).")
@json_option
def rollouts_pause(rollout_id: int, reason: str) -> int:
    """Start no other host until resumed (changes under way finish, and their checks count)."""
    return decide(rollout_id, "pause", reason)


@rollouts.command("resume")
@click.argument("rollout_id", type=int)
@click.option("--reason", default="", help="Why (audited; default: resumed by you).")
@follow_options
@json_option
def rollouts_resume(
    rollout_id: int, reason: str, follow: bool, interval: float, timeout: float | None
) -> int:
    """Carry on where it stopped; each host must still match what was approved."""
    return decide(rollout_id, "resume", reason, follow=follow, interval=interval, timeout=timeout)


@rollouts.command("abort")
@click.argument("rollout_id", type=int)
@reason_option
@json_option
def rollouts_abort(rollout_id: int, reason: str) -> int:
    """Stop for good: no other host is started; a change under way finishes by itself."""
    return decide(rollout_id, "abort", reason)


def decide(
    rollout_id: int,
    action: str,
    reason: str,
    *,
    follow: bool = False,
    interval: float = 1.0,
    timeout: float | None = None,
) -> int:
    with rollouts_api():
        # No reason at all for a pause or resume: the server writes its own ("paused by ...").
        body = {"reason": reason} if reason else {}
        rollout = client().post(f"{PATH}{rollout_id}/{action}/", body)
        if follow:
            return finish(rollout_id, interval=interval, timeout=timeout)
    if wants_json():
        out.emit_json(rollout)
        return ExitCode.OK
    click.echo(f"{title(rollout)}: {status_text(rollout)}")
    if action == "approve":
        # Hosts whose newest snapshot could not back the approval are left out, and said so.
        for host in rollout.get("hosts") or []:
            if host["status"] == "skipped":
                click.echo(host_line(host))
    return ExitCode.OK


@rollouts.command("watch")
@click.argument("rollout_id", type=int)
@watch_options
@json_option
def rollouts_watch(rollout_id: int, interval: float, timeout: float | None) -> int:
    """Follow a rollout until it ends, printing each wave and each host's moves as they happen.
    Exits 0 when it succeeded, 8 halted (rolled back) or failed, 5 rejected or aborted, 9 when
    --timeout passed first."""
    with rollouts_api():
        return finish(rollout_id, interval=interval, timeout=timeout)


def finish(rollout_id: int, *, interval: float, timeout: float | None) -> int:
    rollout, code = watch(
        client(), rollout_id, interval=interval, timeout=timeout, quiet=wants_json()
    )
    if wants_json():
        out.emit_json(rollout)
    return code
