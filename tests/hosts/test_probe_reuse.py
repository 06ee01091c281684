"""Reusing what a host's previous probe read (hosts.parsers.reuse): a probe that reads only the
sections that changed gives exactly the parse of reading them all, probe after probe, whatever
changed in between. The outputs are the simulator's, over real SSH (hosts.ssh.ConnectionPool)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import pytest

from hosts import commands, probe_sections
from hosts.parsers import ProbeParse, parse_probe
from hosts.parsers.reuse import SectionMemo, SectionMemos
from hosts.probe import probe, section_memos
from hosts.ssh import ConnectionPool, SSHTarget
from simulator import catalog
from tests.fleet import FleetHandle
from tests.waiting import wait_until

UNIT = catalog.DEFAULT_UNIT
DROP_IN = f"/etc/systemd/system/{UNIT}.d/override.conf"
ENV_FILE = "/etc/vllm/extra.env"
SPEC = commands.ProbeSpec(
    servers=(
        commands.ServerSpec(
            unit=UNIT,
            port=catalog.DEFAULT_PORT,
            environment_files=(ENV_FILE,),
            journal_lines=20,
        ),
    ),
    integrity=False,
)


def target(fleet: FleetHandle, name: str) -> SSHTarget:
    return SSHTarget(
        fleet.address, fleet.port(name), "root", fleet.client_private_key,
        fleet.host_public_key(name),
    )  # fmt: skip


def outputs_over_ssh(fleet: FleetHandle, name: str, changes: list[Callable[[], Any]]) -> list[str]:
    """The probe script's output before the first change and after each, over one connection."""
    script = probe_sections.probe_script(SPEC)

    async def go() -> list[str]:
        pool = ConnectionPool()
        found = []
        for change in [lambda: None, *changes]:
            change()
            result = await pool.run(target(fleet, name), script, connect_timeout=10,
                                    command_timeout=30)  # fmt: skip
            found.append(result.stdout + result.stderr)
        await pool.close_all()
        return found

    return asyncio.run(go())


def parse(output: str, memo: SectionMemo | None = None) -> ProbeParse:
    return parse_probe(
        output,
        [UNIT],
        integrity=False,
        environment_files={UNIT: (ENV_FILE,)},
        journal_lines={UNIT: 20},
        memo=memo,
    )


def assert_each_probe_parses_as_afresh(outputs: list[str]) -> list[SectionMemo]:
    """Probe after probe, each with the memo of the one before: the same state, problems and
    redacted sections as a parse without one."""
    memos: list[SectionMemo] = []
    for output in outputs:
        memo = SectionMemo(memos[-1] if memos else None)
        reused = parse(output, memo)
        memo.done()
        fresh = parse(output)
        assert reused.state == fresh.state
        assert reused.state.to_json() == fresh.state.to_json()
        assert reused.sections == fresh.sections
        memos.append(memo)
    return memos


QWEN = "/models/Qwen/Qwen3-235B-A22B-FP8"  # fits eight H100s (Kimi's NVFP4 needs Blackwell)


def _h100(make_fleet: Callable[..., FleetHandle]) -> FleetHandle:
    """One 8x H100 host with NVLink, serving; a simulated minute in 60 ms of real time, so
    NVLink counters move between two probes."""
    fleet = make_fleet(1, hardware={"gpu-01": "h100-sxm"}, time_scale=0.001)
    text = catalog.unit_file_text(model_path=QWEN, tensor_parallel_size=8)
    fleet.set_unit_file("gpu-01", UNIT, text, reload=True)
    fleet.restart_unit("gpu-01")
    wait_until(lambda: fleet.state("gpu-01")["units"][UNIT]["phase"] == "ready", timeout=10)
    return fleet


def nvlink_errors_counted(fleet: FleetHandle) -> None:
    """The fault on, and on long enough (in the host's time) for its counters to move."""
    fleet.set_fault("gpu-01", "nvlink_errors")
    wait_until(lambda: re.search(r"Errors: [1-9]", fleet.run("gpu-01", "nvidia-smi nvlink -e")[0]))


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda f: f.set_inflight("gpu-01", 3, 2), id="metrics"),
        pytest.param(nvlink_errors_counted, id="nvlink-counters"),
        pytest.param(lambda f: f.set_fault("gpu-01", "nvlink_down"), id="nvlink-status"),
        pytest.param(lambda f: f.set_fault("gpu-01", "row_remap_pending"), id="remapped-rows"),
        pytest.param(lambda f: f.set_fault("gpu-01", "ecc_uncorrectable"), id="gpu-errors"),
        pytest.param(lambda f: f.set_fault("gpu-01", "gpu_fell_off_bus"), id="lost-gpu"),
        pytest.param(lambda f: f.set_fault("gpu-01", "gpu_driver_error"), id="driver-error"),
        pytest.param(lambda f: f.set_fault("gpu-01", "foreign_gpu_process"), id="processes"),
        pytest.param(lambda f: f.set_fault("gpu-01", "hw_slowdown"), id="gpu-details"),
        pytest.param(
            lambda f: f.write_file("gpu-01", DROP_IN, "[Service]\nEnvironment=A_TOKEN=s3cr3t\n"),
            id="drop-in",
        ),
        pytest.param(
            lambda f: f.write_file("gpu-01", ENV_FILE, "HF_TOKEN=hf_abcdefghijklmnopqrstuvwx\n"),
            id="env-file",
        ),
        pytest.param(lambda f: f.stop_unit("gpu-01"), id="unit-stopped"),
    ],
)
def test_a_probe_after_one_change_parses_as_a_fresh_parse(
    make_fleet: Callable[..., FleetHandle], change: Callable[[FleetHandle], None]
) -> None:
    fleet = _h100(make_fleet)

    def apply() -> None:
        change(fleet)

    # unchanged, the change, unchanged again, the change undone by a restart of the unit
    outputs = outputs_over_ssh(
        fleet, "gpu-01", [lambda: None, apply, lambda: None, lambda: fleet.restart_unit("gpu-01")]
    )

    memos = assert_each_probe_parses_as_afresh(outputs)
    assert memos[1].reused >= 10  # most sections had not changed
    assert memos[2].read  # and what the change changed was read


def test_rules_that_compare_two_probes_see_each_probes_own_counters(
    make_fleet: Callable[..., FleetHandle],
) -> None:
    """engine_stalled and nvlink_errors_rising (deployments.verdict_table) compare a snapshot
    with the one before: a reused section must not stand for a changed one."""
    fleet = _h100(make_fleet)
    outputs = outputs_over_ssh(
        fleet,
        "gpu-01",
        [lambda: nvlink_errors_counted(fleet), lambda: None],
    )
    memos: list[SectionMemo] = []
    states = []
    for output in outputs:
        memo = SectionMemo(memos[-1] if memos else None)
        states.append(parse(output, memo).state)
        memo.done()
        memos.append(memo)

    def errors(state: Any) -> int:
        return sum(link.errors for gpu in state.nvlinks for link in gpu.links)

    assert errors(states[0]) == 0 < errors(states[1]) <= errors(states[2])
    for state in states:
        assert state.deployments[UNIT].server.generation_tokens_total is not None


def test_the_probe_keeps_one_memo_per_host_and_never_reads_another_hosts(
    make_fleet: Callable[..., FleetHandle],
) -> None:
    fleet = make_fleet(2)
    section_memos.clear()

    async def go() -> list[Any]:
        pool = ConnectionPool()
        found = [
            await probe(pool, target(fleet, name), SPEC, connect_timeout=10, command_timeout=30)
            for name in ("gpu-01", "gpu-02", "gpu-01", "gpu-02")
        ]
        await pool.close_all()
        return found

    outcomes = asyncio.run(go())

    assert len(section_memos) == 2
    uuids = [{g["uuid"] for g in o.parsed["gpus"]} for o in outcomes]
    assert uuids[0] == uuids[2] and uuids[1] == uuids[3] and not uuids[0] & uuids[1]
    assert all(o.status == "ok" for o in outcomes), [o.error for o in outcomes]


def test_the_memos_are_bounded_keep_the_hosts_they_have_and_forget_idle_ones() -> None:
    memos = SectionMemos(max_hosts=2)
    for host in ("a", "b", "c", "a"):
        memos.keep(host, SectionMemo())

    assert len(memos) == 2
    # full: a new host is not kept, so the others keep being reused round after round
    assert memos.begin("c")._previous == {} and "a" in memos._memos and "b" in memos._memos
    assert memos.forget_idle(0) == 2 and len(memos) == 0


def test_a_drop_in_loaded_later_reads_the_same_unit_files_anew(
    make_fleet: Callable[..., FleetHandle],
) -> None:
    """`systemctl cat` prints a new drop-in at once, `systemctl show` names it only after a
    daemon-reload: the unit files' output is the same before and after the reload, what it
    is split by is not."""
    fleet = make_fleet(1)
    outputs = outputs_over_ssh(
        fleet,
        "gpu-01",
        [
            lambda: fleet.write_file("gpu-01", DROP_IN, "[Service]\nEnvironment=A=1\n"),
            lambda: fleet.daemon_reload("gpu-01"),
            lambda: fleet.write_file("gpu-01", DROP_IN, None),
            lambda: None,
            lambda: fleet.daemon_reload("gpu-01"),
        ],
    )

    assert_each_probe_parses_as_afresh(outputs)
