"""Following a rollout until it ends: its status, each wave as it starts, and each host's
transitions (running with its change, succeeded, skipped and why, the check that failed, rolled
back), printed as they happen.

Polling the rollout's JSON, as the rollout page polls its fragment. When it has ended is the
server's word, as for a change: its `finished_at`, and each host's (an aborted rollout's change
still under way on a host ends by itself, and is followed to its end); its status says how.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import click

from . import output as out
from .client import Client
from .exits import ExitCode, rollout_outcome

# The statuses a watcher sees before the waves' lines: the rollout is about to move hosts.
STARTING = ("approved", "running")


def wave_label(wave: int) -> str:
    """As the server's pages name a wave: the canary, then wave 2, 3, ..."""
    return "the canary" if wave == 0 else f"wave {wave + 1}"


def wave_heading(wave: int, waves: int) -> str:
    """The wave and where it stands: "the canary (wave 1 of 3)", "wave 2 of 3"."""
    return f"the canary (wave 1 of {waves})" if wave == 0 else f"wave {wave + 1} of {waves}"


def hosts_count(count: int) -> str:
    return f"{count} host" if count == 1 else f"{count} hosts"


def title(rollout: dict[str, Any]) -> str:
    return f"rollout #{rollout['id']} {what(rollout)}"


def what(rollout: dict[str, Any]) -> str:
    return rollout["kind"] + (f" to {rollout['model']}" if rollout.get("model") else "")


def status_text(rollout: dict[str, Any]) -> str:
    reason = rollout.get("status_reason")
    return rollout["status"] + (f": {reason}" if reason else "")


def host_detail(host: dict[str, Any]) -> str:
    """Why a host is where it is: the check it failed (and how), why it was skipped."""
    said = []
    if host.get("gate_check"):
        said.append(f"{host['gate_check']} check: {host.get('gate_failure') or 'failed'}")
    if host.get("skip_reason"):
        said.append(host["skip_reason"])
    return "; ".join(said)


def host_line(host: dict[str, Any], *, detail: bool = True) -> str:
    line = f"  {host['host']}: {host['status']}"
    changes = []
    if host.get("change") is not None:
        changes.append(f"change #{host['change']}")
    if host.get("rollback_change") is not None:
        changes.append(f"rollback change #{host['rollback_change']}")
    if changes:
        line += f" ({', '.join(changes)})"
    text = host_detail(host) if detail else ""
    return line + (f": {text}" if text else "")


def started(rollout: dict[str, Any], wave: int) -> bool:
    return bool(rollout.get("started_at")) and wave <= rollout.get("current_wave", 0)


def settled(rollout: dict[str, Any]) -> bool:
    """Nothing of it will move any more: it has ended, and so has every host's turn."""
    hosts = rollout.get("hosts") or []
    return bool(rollout.get("finished_at")) and all(h.get("finished_at") for h in hosts)


class Progress:
    """What a watcher has already said of one rollout, so that each poll says only what moved."""

    def __init__(self) -> None:
        self.status: str | None = None
        self.waves: set[int] = set()
        self.hosts: dict[str, tuple[Any, ...]] = {}
        self.details: dict[str, str] = {}
        self.wave_of: dict[str, int] = {}
        self.waiting_said = False

    def lines(self, rollout: dict[str, Any]) -> Iterator[str]:
        """The lines this poll adds, in the order things happen: the rollout starting, then
        wave by wave each wave's start and its hosts' moves, then a pause or a halt. The line
        that ends it is `end_lines`'."""
        status = rollout["status"]
        final = bool(rollout.get("finished_at"))
        first = self.status is None
        moved = status != self.status
        self.status = status
        if first:
            count = hosts_count(len(rollout.get("hosts") or []))
            waves = "1 wave" if rollout["waves"] == 1 else f"{rollout['waves']} waves"
            yield (
                f"{title(rollout)}: {count} in {waves}, at most {rollout['max_down']} "
                "changing at once"
            )
        if moved and not final and (first or status in STARTING):
            yield f"rollout #{rollout['id']}: {status_text(rollout)}"
        yield from self._waves(rollout)
        if moved and not final and not first and status not in STARTING:
            yield f"rollout #{rollout['id']}: {status_text(rollout)}"
        if final and not settled(rollout) and not self.waiting_said:
            self.waiting_said = True
            busy = [h for h in rollout.get("hosts") or [] if not h.get("finished_at")]
            names = ", ".join(host_line(h, detail=False).strip() for h in busy)
            yield (
                f"rollout #{rollout['id']}: {status_text(rollout)}; the changes under way end "
                f"by themselves: {names}"
            )

    def _waves(self, rollout: dict[str, Any]) -> Iterator[str]:
        hosts = sorted(rollout.get("hosts") or [], key=lambda h: h["wave"])
        moved = set()
        for host in hosts:
            before = self.wave_of.get(host["host"])
            self.wave_of[host["host"]] = host["wave"]
            if before is not None and before != host["wave"]:
                moved.add(host["host"])
        for wave in sorted({h["wave"] for h in hosts}):
            if not started(rollout, wave):
                continue
            if wave not in self.waves:
                self.waves.add(wave)
                names = ", ".join(h["host"] for h in hosts if h["wave"] == wave)
                yield f"{wave_heading(wave, rollout['waves'])} started: {names}"
            for host in hosts:
                if host["wave"] == wave:
                    yield from self._host(host)
                    if host["host"] in moved:
                        # A skipped canary proved nothing: the next host becomes the canary.
                        yield f"  {host['host']}: moved to {wave_label(wave)}"

    def _host(self, host: dict[str, Any], *, pending: bool = False) -> Iterator[str]:
        seen = (host["status"], host.get("change"), host.get("rollback_change"))
        name = host["host"]
        if self.hosts.get(name) == seen or (host["status"] == "pending" and not pending):
            return
        self.hosts[name] = seen
        detail = host_detail(host)
        # A failed check stays on the host through its rollback: said once, when it appears.
        fresh = detail != self.details.get(name, "")
        self.details[name] = detail
        yield host_line(host, detail=fresh)

    def end_lines(self, rollout: dict[str, Any]) -> Iterator[str]:
        """The hosts no wave reached (one line), any other host not said yet, then how the
        rollout ended: the last line."""
        unsaid = [h for h in rollout.get("hosts") or [] if h["host"] not in self.hosts]
        missed = [h["host"] for h in unsaid if h["status"] == "not_reached"]
        if missed:
            yield f"  not reached: {', '.join(missed)}"
        for host in unsaid:
            if host["status"] not in ("not_reached", "pending"):
                yield from self._host(host)
        yield f"{title(rollout)}: {status_text(rollout)}"


def watch(
    client: Client,
    rollout_id: int,
    *,
    interval: float,
    timeout: float | None,
    quiet: bool,
) -> tuple[dict[str, Any], ExitCode]:
    """Poll rollout `rollout_id` until it has ended (or `timeout` seconds pass), printing what
    moved (on stderr when `quiet`: --json prints only the end)."""
    say = out.note if quiet else click.echo
    deadline = None if timeout is None else time.monotonic() + timeout
    progress = Progress()
    while True:
        rollout = client.get(f"rollouts/{rollout_id}/")
        for line in progress.lines(rollout):
            say(line)
        if settled(rollout):
            for line in progress.end_lines(rollout):
                say(line)
            return rollout, rollout_outcome(rollout["status"])
        if deadline is not None and time.monotonic() >= deadline:
            say(
                f"rollout #{rollout_id} is still {rollout['status']} after {timeout:g} s; it goes "
                f"on: `cpctl rollouts watch {rollout_id}` follows it again"
            )
            return rollout, ExitCode.UNFINISHED
        time.sleep(interval)
