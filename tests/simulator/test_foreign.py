"""The `foreign_gpu_process` fault: someone else's python3 on every GPU, outside any unit."""

from __future__ import annotations

import json
import re

from hosts import commands
from simulator import catalog
from simulator.state import GPU_MEMORY_MIB, Machine
from tests.fleet import FleetHandle, ssh

UNIT = catalog.DEFAULT_UNIT
FAULT = "foreign_gpu_process"
FULL = int(0.92 * GPU_MEMORY_MIB)  # vLLM 0.32's default --gpu-memory-utilization
APPS = commands.join(
    [
        "nvidia-smi",
        "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
        "--format=csv,noheader",
    ]
)


def apps(fleet: FleetHandle, name: str = "gpu-01") -> list[list[str]]:
    result = ssh(fleet, name, APPS)
    assert result.exit_status == 0
    return [line.split(", ") for line in str(result.stdout).splitlines()]


def memory_used(fleet: FleetHandle, name: str = "gpu-01") -> list[int]:
    out = ssh(fleet, name, commands.render(commands.gpu_query())).stdout
    return [int(line.split(", ")[3].split()[0]) for line in str(out).splitlines()]


def ps_units(fleet: FleetHandle, name: str = "gpu-01") -> dict[int, str]:
    out = str(ssh(fleet, name, "ps -e -o pid=,unit=").stdout)
    return {int(line[:7]): line[8:] for line in out.splitlines()}


def test_foreign_processes_show_everywhere(sim_fleet: FleetHandle) -> None:
    sim_fleet.set_fault("gpu-01", FAULT)
    rows = apps(sim_fleet)
    foreign = [r for r in rows if r[1] == "python3"]
    uuids = [g["uuid"] for g in sim_fleet.state("gpu-01")["gpus"]]
    assert len(rows) == 16 and len(foreign) == 8
    assert [r[2] for r in foreign] == ["4096 MiB"] * 8
    assert [r[3] for r in foreign] == uuids  # one per GPU, on every GPU
    assert memory_used(sim_fleet) == [FULL + 4096] * 8
    units = ps_units(sim_fleet)
    assert {units[int(r[0])] for r in foreign} == {"session-7.scope"}
    assert {units[int(r[0])] for r in rows if r[1] != "python3"} == {UNIT}

    truth = sim_fleet.state("gpu-01")
    assert [p["pid"] for p in truth["foreign_processes"]] == [int(r[0]) for r in foreign]
    assert {p["unit"] for p in truth["foreign_processes"]} == {"session-7.scope"}
    assert truth["faults"] == [FAULT]
    assert (
        apps(sim_fleet, "gpu-02")[0][1] == "VLLM::Worker_TP0"
        and len(apps(sim_fleet, "gpu-02")) == 8
    )


def test_their_pids_are_stable_while_the_fault_is_on(sim_fleet: FleetHandle) -> None:
    sim_fleet.set_fault("gpu-01", FAULT)
    before = [p["pid"] for p in sim_fleet.state("gpu-01")["foreign_processes"]]
    sim_fleet.set_fault("gpu-01", FAULT)  # switching it on again changes nothing
    sim_fleet.restart_unit("gpu-01")
    sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    assert [p["pid"] for p in sim_fleet.state("gpu-01")["foreign_processes"]] == before
    assert [int(r[0]) for r in apps(sim_fleet) if r[1] == "python3"] == before

    sim_fleet.set_fault("gpu-01", FAULT, False)
    assert sim_fleet.state("gpu-01")["foreign_processes"] == []
    assert [r[1] for r in apps(sim_fleet)] == [f"VLLM::Worker_TP{i}" for i in range(8)]
    assert memory_used(sim_fleet) == [FULL] * 8
    assert not set(before) & set(ps_units(sim_fleet))


def test_a_start_that_needs_the_memory_they_hold_fails(sim_fleet: FleetHandle) -> None:
    sim_fleet.set_fault("gpu-01", FAULT)
    # 0.97 x 95.6 GiB is more than the 91.6 GiB the foreign processes leave free.
    text = catalog.unit_file_text(extra_args=("--gpu-memory-utilization=0.97",), revision=2)
    sim_fleet.set_unit_file("gpu-01", UNIT, text, reload=True)
    sim_fleet.restart_unit("gpu-01")
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "failed", timeout=5)
    assert unit["last_exit"] == {"failure": "free_memory", "status": 1}
    journal = str(ssh(sim_fleet, "gpu-01", commands.render(commands.unit_journal(UNIT, 40))).stdout)
    match = re.search(
        r"Free memory on device \(([\d.]+)/95\.59 GiB\) on startup is less than", journal
    )
    assert match and abs(float(match.group(1)) - (GPU_MEMORY_MIB - 4096) / 1024) < 0.01
    assert "(0.97, 92.72 GiB)" in journal

    # With the default 0.92 the same start fits next to them.
    sim_fleet.set_unit_file("gpu-01", UNIT, catalog.unit_file_text(revision=3), reload=True)
    sim_fleet.start_unit("gpu-01")
    sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    assert memory_used(sim_fleet) == [FULL + 4096] * 8


def test_they_never_push_a_gpu_past_its_memory() -> None:
    machine = Machine("gpu-09", load_seconds=0.0)
    text = catalog.unit_file_text(extra_args=("--gpu-memory-utilization=0.99",))
    machine.write_file(machine.unit_path(UNIT), text)
    machine.daemon_reload()
    unit = machine.lookup_unit(UNIT)
    assert unit is not None
    machine.restart(unit)
    machine.set_fault(FAULT)  # started while the server already holds 99%
    for gpu in machine.gpu_readings():
        assert gpu.memory_used_mib <= gpu.memory_total_mib
    apps = machine.compute_apps()
    for index in range(8):
        held = sum(a.used_memory_mib for a in apps if a.gpu_index == index)
        assert held + machine.gpus[index].idle_mib <= GPU_MEMORY_MIB
    foreign = [a for a in apps if a.process_name == "python3"]
    assert len(foreign) == 8 and all(0 < a.used_memory_mib < 4096 for a in foreign)


def test_simctl_and_fleet_options_switch_it(make_fleet) -> None:
    fleet = make_fleet(2, faults={"gpu-02": [FAULT]})
    assert len(fleet.state("gpu-02")["foreign_processes"]) == 8
    assert fleet.state("gpu-01")["foreign_processes"] == []
    result = ssh(fleet, "gpu-01", f"simctl fault {FAULT} on")
    assert result.stdout == f"gpu-01: fault {FAULT} on\n"
    status = json.loads(str(ssh(fleet, "gpu-01", "simctl status").stdout))
    assert len(status["foreign_processes"]) == 8
    assert ssh(fleet, "gpu-01", f"simctl fault {FAULT} off").exit_status == 0
    assert fleet.state("gpu-01")["foreign_processes"] == []


def test_how_much_they_hold_can_be_set(sim_fleet: FleetHandle) -> None:
    sim_fleet.set_fault("gpu-01", FAULT)
    pids = [p["pid"] for p in sim_fleet.state("gpu-01")["foreign_processes"]]
    sim_fleet.set_foreign_memory("gpu-01", 12288)
    # Next to the running server only what is left fits: the GPUs are full, not overfull.
    assert memory_used(sim_fleet) == [GPU_MEMORY_MIB] * 8
    sim_fleet.stop_unit("gpu-01")
    sim_fleet.set_foreign_memory("gpu-01", 12288)
    state = sim_fleet.state("gpu-01")
    assert [p["pid"] for p in state["foreign_processes"]] == pids
    assert {p["used_memory_mib"] for p in state["foreign_processes"]} == {12288}
    # 0.92 of each GPU is no longer free: the start fails vLLM's free-memory check.
    sim_fleet.start_unit("gpu-01")
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "failed", timeout=5)
    assert unit["last_exit"] == {"failure": "free_memory", "status": 1}
