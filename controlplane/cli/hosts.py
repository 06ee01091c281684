"""cpctl hosts (list, show, probe, journal, maintenance) and cpctl snapshots (list, show, diff)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from urllib.parse import quote

import click

from . import output as out
from .context import client, json_option, wants_json
from .exits import CliError, ExitCode


def host_path(name: str, *rest: str) -> str:
    return "/".join(["hosts", quote(name, safe=""), *(quote(r, safe="") for r in rest)]) + "/"


# --- hosts -------------------------------------------------------------------------------------


@click.group()
def hosts() -> None:
    """Hosts: the fleet, one host, a probe now, a unit's journal, maintenance."""


@hosts.command("list")
@json_option
def hosts_list() -> None:
    """Every host with its newest snapshot."""
    rows = list(client().pages("hosts/"))
    if wants_json():
        out.emit_json(rows)
        return
    out.table(
        [
            [
                h["name"],
                f"{h['address']}:{h['port']}",
                h["enabled"],
                h["host_key_status"],
                *snapshot_cells(h.get("latest_snapshot")),
            ]
            for h in rows
        ],
        ["HOST", "ADDRESS", "ENABLED", "HOST KEY", "SNAPSHOT", "STATUS", "AGE"],
    )


def snapshot_cells(brief: dict[str, Any] | None) -> list[Any]:
    if not brief:
        return ["never probed", "-", "-"]
    stale = " (stale)" if brief.get("stale") else ""
    return [f"#{brief['id']}", brief["status"], out.age(brief["age_seconds"]) + stale]


@hosts.command("show")
@click.argument("name")
@json_option
def hosts_show(name: str) -> None:
    """One host, its deployments and its newest snapshot."""
    host = client().get(host_path(name))
    if wants_json():
        out.emit_json(host)
        return
    brief = host.get("latest_snapshot")
    out.fields(
        [
            ("host", host["name"]),
            ("address", f"{host['username']}@{host['address']}:{host['port']}"),
            ("sudo", host["use_sudo"]),
            ("enabled", host["enabled"]),
            ("credential", host["credential"]),
            ("host key", f"{host['host_key_status']} {host.get('host_key_fingerprint') or ''}"),
            ("labels", host.get("labels") or "-"),
            ("last probe", out.when(host.get("last_probe_at"))),
            ("latest snapshot", " ".join(str(c) for c in snapshot_cells(brief))),
        ]
    )
    deployments = list(client().pages("deployments/", {"host": name}))
    click.echo()
    out.table(
        [
            [
                d["id"],
                d["unit"],
                f"{d['model']['name']} ({d['model']['variant']})",
                d["tensor_parallel_size"],
                d["port"],
                (d.get("current_revision") or {}).get("number"),
            ]
            for d in deployments
        ],
        ["DEPLOYMENT", "UNIT", "MODEL", "TP", "PORT", "REVISION"],
    )


@hosts.command("probe")
@click.argument("name")
@click.option("--integrity", is_flag=True, help="Also check the engine's installed files.")
@click.option(
    "--wait",
    is_flag=True,
    help="Probe now and print the snapshot (exit 8 unless it is ok); otherwise queue it.",
)
@json_option
def hosts_probe(name: str, integrity: bool, wait: bool) -> int:
    """Take a snapshot of a host (needs the operator or approver role)."""
    params = {"integrity": "true" if integrity else "false"}
    if not wait:
        queued = client().post(host_path(name, "snapshots"), params={**params, "async": "true"})
        if wants_json():
            out.emit_json(queued)
        else:
            click.echo(f"{queued['detail']} `cpctl snapshots show {name}` shows it once taken.")
        return ExitCode.OK
    snapshot = client().post(host_path(name, "snapshots"), params=params, long=True)
    show_snapshot(snapshot, raw=False)
    return ExitCode.OK if snapshot["status"] == "ok" else ExitCode.FAILED


@hosts.command("journal")
@click.argument("name")
@click.option("--unit", help="The unit (default: the host's only deployment's).")
@click.option("--lines", "-n", type=int, default=100, show_default=True)
@json_option
def hosts_journal(name: str, unit: str | None, lines: int) -> None:
    """The newest lines of a deployed unit's journal, read over SSH now (audited)."""
    if unit is None:
        units = sorted({d["unit"] for d in client().pages("deployments/", {"host": name})})
        if len(units) != 1:
            raise CliError(
                f"{name} has {len(units)} deployed units; name one with --unit: "
                + (", ".join(units) or "none"),
                ExitCode.USAGE if units else ExitCode.NOT_FOUND,
            )
        unit = units[0]
    journal = client().get(host_path(name, "units", unit, "journal"), {"lines": lines})
    if wants_json():
        out.emit_json(journal)
        return
    for line in journal["lines"]:
        click.echo(line)


@hosts.group("maintenance")
def maintenance() -> None:
    """A host's maintenance: rollouts skip it and its verdict sends no webhooks until it ends."""


def _duration(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    """`--for 90m`, `4h` or `2d` as a timedelta."""
    if value is None:
        return None
    found = re.fullmatch(r"\s*(\d+)\s*([mhd])\s*", value)
    if not found:
        raise click.BadParameter("a whole number of minutes, hours or days: 90m, 4h, 2d")
    unit = {"m": "minutes", "h": "hours", "d": "days"}[found[2]]
    return dt.timedelta(**{unit: int(found[1])})


def show_maintenance(name: str, state: dict[str, Any]) -> None:
    if wants_json():
        out.emit_json(state)
    elif not state["in_maintenance"]:
        click.echo(f"{name}: not in maintenance")
    else:
        click.echo(f"{name}: in maintenance until {state['until']} (since {state['since']}, "
                   f"by {state['by']}): {state['reason']}")  # fmt: skip


@maintenance.command("show")
@click.argument("name")
@json_option
def maintenance_show(name: str) -> None:
    """Whether the host is in maintenance, why, until when and by whom."""
    show_maintenance(name, client().get(host_path(name, "maintenance")))


@maintenance.command("start")
@click.argument("name")
@click.option("--reason", required=True, help="What is being done, in words (audited).")
@click.option("--until", "until", type=click.DateTime(), help="When it ends (UTC unless a zone).")
@click.option("--for", "length", callback=_duration, help="Or how long from now: 90m, 4h, 2d.")
@json_option
def maintenance_start(
    name: str, reason: str, until: dt.datetime | None, length: dt.timedelta | None
) -> None:
    """Put the host in maintenance, or change its reason and end time (operator role)."""
    if (until is None) == (length is None):
        raise click.UsageError("say when it ends: --until TIME or --for 4h")
    if length is not None:
        until = dt.datetime.now(dt.UTC) + length
    assert until is not None
    body = {"reason": reason, "until": until.isoformat()}
    entered = client().post(host_path(name, "maintenance"), body)
    show_maintenance(name, entered)
    if not wants_json():
        if entered["changed"]:
            click.echo("It was in maintenance already: its reason and end time are changed.")
        if entered["running_change"] is not None:
            click.echo(f"Change #{entered['running_change']} is running on it; maintenance "
                       "does not stop it.")  # fmt: skip


@maintenance.command("end")
@click.argument("name")
@json_option
def maintenance_end(name: str) -> None:
    """Take the host out of maintenance now (exit 5 if it is not in maintenance)."""
    show_maintenance(name, client().delete(host_path(name, "maintenance")))


# --- snapshots ---------------------------------------------------------------------------------


@click.group()
def snapshots() -> None:
    """Snapshots: what a probe saw. REF is a snapshot's id, or a host's name for its newest."""


def snapshot_get(ref: str) -> dict[str, Any]:
    if ref.isdigit():
        return client().get(f"snapshots/{int(ref)}/")  # type: ignore[no-any-return]
    return client().get(host_path(ref, "snapshots", "latest"))  # type: ignore[no-any-return]


@snapshots.command("list")
@click.argument("host")
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True)
@json_option
def snapshots_list(host: str, limit: int) -> None:
    """A host's snapshots, newest first."""
    rows = list(client().pages(host_path(host, "snapshots"), limit=limit))
    if wants_json():
        out.emit_json(rows)
        return
    out.table(
        [
            [
                s["id"],
                out.when(s["taken_at"]),
                out.age(s["age_seconds"]),
                s["status"],
                s["trigger"],
                f"{s['duration_ms']} ms",
                s["digest"][:12],
            ]
            for s in rows
        ],
        ["SNAPSHOT", "TAKEN", "AGE", "STATUS", "TRIGGER", "TOOK", "DIGEST"],
    )


@snapshots.command("show")
@click.argument("ref")
@click.option("--raw", is_flag=True, help="Also print each probe section's raw output.")
@json_option
def snapshots_show(ref: str, raw: bool) -> None:
    """One snapshot: status, material fingerprint, GPUs and units."""
    show_snapshot(snapshot_get(ref), raw=raw)


def show_snapshot(snapshot: dict[str, Any], *, raw: bool) -> None:
    if wants_json():
        out.emit_json(snapshot)
        return
    out.fields(
        [
            ("snapshot", f"#{snapshot['id']} of {snapshot['host']}"),
            ("taken", f"{out.when(snapshot['taken_at'])} ({out.age(snapshot['age_seconds'])} ago)"),
            (
                "status",
                snapshot["status"] + (f": {snapshot['error']}" if snapshot["error"] else ""),
            ),
            ("trigger", snapshot["trigger"]),
            ("digest", snapshot["digest"]),
        ]
    )
    click.echo("\nmaterial fingerprint (what a change compares before it acts):")
    out.fields(sorted(snapshot["material_fingerprint"].items()))
    parsed = snapshot.get("parsed") or {}
    if parsed.get("gpus"):
        click.echo()
        out.table(
            [
                [
                    g.get("index"),
                    g.get("name"),
                    f"{g.get('memory_used_mib')} / {g.get('memory_total_mib')} MiB",
                    g.get("power_draw_w"),
                    g.get("utilization_pct"),
                    g.get("temperature_c"),
                ]
                for g in parsed["gpus"]
            ],
            ["GPU", "NAME", "MEMORY", "POWER W", "UTIL %", "TEMP C"],
        )
    units = parsed.get("deployments") or {}
    if units:
        click.echo()
        out.table(
            [unit_row(name, d) for name, d in sorted(units.items())],
            ["UNIT", "STATE", "PID", "SERVES", "HEALTHY", "RUNNING"],
        )
    for problem in parsed.get("problems") or []:
        click.echo(f"problem: {out.cell(problem)}")
    if raw:
        for section, result in sorted((snapshot.get("raw") or {}).items()):
            click.echo(f"\n--- {section} ---")
            click.echo(out.cell(result.get("output") if isinstance(result, dict) else result))


def unit_row(name: str, deployment: dict[str, Any]) -> list[Any]:
    unit = deployment.get("unit") or {}
    server = deployment.get("server") or {}
    state = f"{unit.get('active_state', '?')}/{unit.get('sub_state', '?')}"
    return [
        name,
        state,
        unit.get("main_pid"),
        server.get("models"),
        server.get("healthy"),
        server.get("requests_running"),
    ]


@snapshots.command("diff")
@click.argument("before")
@click.argument("after")
@json_option
def snapshots_diff(before: str, after: str) -> int:
    """What differs materially from BEFORE to AFTER, field by field, as the drift check sees it.
    Exits 7 (drift) when something does."""
    first, second = snapshot_get(before)["id"], snapshot_get(after)["id"]
    diff = client().get(f"snapshots/{first}/diff/{second}/")
    differences = diff["differences"]
    if wants_json():
        out.emit_json(diff)
    elif not differences:
        click.echo(
            f"#{first} ({diff['before_host']}) and #{second} ({diff['after_host']}): "
            "no material difference"
        )
    else:
        out.table(
            [[d["field"], d["before"], d["after"]] for d in differences],
            ["FIELD", f"#{first} ({diff['before_host']})", f"#{second} ({diff['after_host']})"],
        )
    return ExitCode.DRIFT if differences else ExitCode.OK
