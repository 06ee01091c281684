"""What `cpctl rollouts watch` says between two looks at a rollout, in-process: the rollout's
JSON as the API gives it, poll after poll (the live runs are tests/cli/test_rollouts.py and
test_rollout_requests.py; these are the moves a live run cannot time)."""

from __future__ import annotations

from typing import Any

from controlplane.cli.rollout_watch import Progress, settled


def host(name: str, wave: int, status: str = "pending", **fields: Any) -> dict[str, Any]:
    return {
        "host": name, "unit": "vllm-kimi-k25.service", "wave": wave, "status": status,
        "skip_reason": "", "gate_check": "", "gate_failure": "", "change": None,
        "rollback_change": None, "finished_at": None, **fields,
    }  # fmt: skip


def rollout(status: str, hosts: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "id": 7, "kind": "restart", "model": None, "status": status, "status_reason": "",
        "waves": 2, "current_wave": 0, "max_down": 1, "started_at": "2026-12-05T08:00:00Z",
        "finished_at": None, "hosts": hosts, **fields,
    }  # fmt: skip


def test_a_skipped_canary_is_replaced_by_the_next_host():
    progress = Progress()
    first = list(progress.lines(rollout("running", [host("gpu-01", 0), host("gpu-02", 1)])))
    assert first == [
        "rollout #7 restart: 2 hosts in 2 waves, at most 1 changing at once",
        "rollout #7: running",
        "the canary (wave 1 of 2) started: gpu-01",
    ]
    skipped = host("gpu-01", 0, "skipped", skip_reason="it is in maintenance", finished_at="x")
    second = list(progress.lines(rollout("running", [skipped, host("gpu-02", 0)])))
    assert second == ["  gpu-01: skipped: it is in maintenance", "  gpu-02: moved to the canary"]
    running = host("gpu-02", 0, "running", change=12)
    assert list(progress.lines(rollout("running", [skipped, running]))) == [
        "  gpu-02: running (change #12)"
    ]


def test_a_failed_check_is_said_once_and_the_halt_after_the_hosts():
    progress = Progress()
    list(progress.lines(rollout("running", [host("gpu-01", 0, "running", change=3)])))
    failed = host(
        "gpu-01", 0, "failed", change=3, gate_check="benchmark",
        gate_failure="412 tok/s, under 90 % of its baseline 520 tok/s", finished_at="x",
    )  # fmt: skip
    assert list(
        progress.lines(rollout("halting", [failed], status_reason="the canary failed"))
    ) == [
        "  gpu-01: failed (change #3): benchmark check: 412 tok/s, under 90 % of its baseline "
        "520 tok/s",
        "rollout #7: halting: the canary failed",
    ]
    back = {**failed, "status": "rolled_back", "rollback_change": 4}
    ended = rollout("halted", [back], status_reason="the canary failed", finished_at="y")
    assert settled(ended)
    assert list(progress.lines(ended)) == ["  gpu-01: rolled_back (change #3, rollback change #4)"]
    assert list(progress.end_lines(ended)) == ["rollout #7 restart: halted: the canary failed"]
