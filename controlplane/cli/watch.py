"""Following a change until it ends: its status and its steps as they happen.

Polling the change's JSON, as the change page polls its fragment; the server's `finished_at`
says when it has ended (set with every final status), and the status says how.
"""

from __future__ import annotations

import time
from typing import Any

import click

from . import output as out
from .client import Client
from .exits import ExitCode, outcome

FAILED_OUTPUT_LINES = 8


def watch(
    client: Client, change_id: int, *, interval: float, timeout: float | None, quiet: bool
) -> tuple[dict[str, Any], ExitCode]:
    """Poll change `change_id` until it ends (or `timeout` seconds pass), printing each status
    and each step as it starts and ends (on stderr when `quiet`: --json prints only the end)."""
    say = out.note if quiet else click.echo
    deadline = None if timeout is None else time.monotonic() + timeout
    status = None
    steps: dict[int, tuple[Any, ...]] = {}
    while True:
        change = client.get(f"changes/{change_id}/")
        # Steps first: the status that ends the change is the last line printed.
        for step in change.get("steps") or []:
            seen = (step["status"], step.get("exit_status"), step.get("finished_at"))
            if steps.get(step["seq"]) != seen:
                steps[step["seq"]] = seen
                say(step_line(step))
        if change["status"] != status:
            status = change["status"]
            reason = f": {change['status_reason']}" if change.get("status_reason") else ""
            say(f"change #{change_id} {change['kind']} on {change['host']}: {status}{reason}")
        if change.get("finished_at"):
            return change, outcome(change["status"])
        if deadline is not None and time.monotonic() >= deadline:
            say(
                f"change #{change_id} is still {status} after {timeout:g} s; it goes on: "
                f"`cpctl changes watch {change_id}` follows it again"
            )
            return change, ExitCode.UNFINISHED
        time.sleep(interval)


def step_line(step: dict[str, Any]) -> str:
    line = f"  step {step['seq']:>2} {step['name']}: {step['status']}"
    if step.get("exit_status") not in (None, 0):
        line += f" (exit {step['exit_status']})"
    if step["status"] == "failed" and step.get("output"):
        tail = step["output"].rstrip().splitlines()[-FAILED_OUTPUT_LINES:]
        line += "".join(f"\n      {text}" for text in tail)
    return line


def drift_lines(change: dict[str, Any]) -> list[str]:
    return [
        f"  {d.get('field')}: {out.cell(d.get('before'))} -> {out.cell(d.get('after'))}"
        for d in change.get("drift_report") or []
    ]
