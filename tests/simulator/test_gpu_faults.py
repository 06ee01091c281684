"""GPU faults: what nvidia-smi, journalctl -k, ps and the engine show on a host with each one,
line for line, and what the kernel log says when it went on."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from simulator import FAULTS, catalog
from simulator.state import gpu_faults
from simulator.state.gpus import gpu_uuid
from tests.fleet import FleetHandle, ssh
from tests.simulator.on_machine import XIDS, Host, host, kernel

UNIT = catalog.DEFAULT_UNIT
ERRORS = (
    "nvidia-smi --query-gpu=index,pci.bus_id,ecc.errors.uncorrected.aggregate.total,"
    "retired_pages.pending --format=csv,noheader"
)
REMAPPED = (
    "nvidia-smi --query-remapped-rows=gpu_uuid,remapped_rows.correctable,"
    "remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv,noheader"
)
LOST = (
    "Unable to determine the device handle for GPU0000:5D:00.0: GPU is lost.  "
    "Reboot the system to recover this GPU"
)


def worker_pid(h: Host, gpu: int) -> int:
    return next(a.pid for a in h.machine.compute_apps() if a.gpu_index == gpu)


def test_the_gpu_faults_are_faults() -> None:
    assert set(gpu_faults.GPU_FAULTS) <= set(FAULTS)
    assert host().run(XIDS) == ("", "", 0)  # no Xid this boot: -q prints nothing


def test_a_gpu_that_fell_off_the_bus_is_lost_to_every_query() -> None:
    h = host("h100-sxm")
    h.machine.set_fault("gpu_fell_off_bus")
    stdout, stderr, status = h.run(ERRORS)
    assert (stderr, status) == ("", 15)
    assert stdout.splitlines() == [
        "0, 00000000:18:00.0, 0, [N/A]",
        "1, 00000000:2A:00.0, 0, [N/A]",
        "2, 00000000:3A:00.0, 0, [N/A]",
        LOST,
        "4, 00000000:9A:00.0, 0, [N/A]",
        "5, 00000000:AB:00.0, 0, [N/A]",
        "6, 00000000:BA:00.0, 0, [N/A]",
        "7, 00000000:DB:00.0, 0, [N/A]",
    ]
    assert h.run(REMAPPED)[0].splitlines()[3] == LOST
    listed = h.run("nvidia-smi -L")[0].splitlines()
    assert listed[3] == LOST and listed[4].startswith("GPU 4: ")
    assert h.run("nvidia-smi -i 3")[0].startswith(LOST + "\n")
    nvlink = h.out("nvidia-smi nvlink -s")
    assert [line[:6] for line in nvlink if line.startswith("GPU")] == [
        f"GPU {i}:" for i in (0, 1, 2, 4, 5, 6, 7)
    ]
    assert len(h.out("nvidia-smi nvlink -e")) == 7 * 55
    topo = h.out("nvidia-smi topo -m")
    assert topo[0].startswith("\tGPU0\tGPU1\tGPU2\tGPU4\tGPU5\t")
    assert not any(line.startswith("GPU3") for line in topo)
    assert h.out(XIDS) == [
        kernel("NVRM: Xid (PCI:0000:5d:00): 79, pid=0, GPU has fallen off the bus.")
    ]


def test_the_lost_gpus_processes_are_not_listed_either() -> None:
    h = host()
    h.machine.set_fault("gpu_fell_off_bus")
    stdout, _, status = h.run(
        "nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid "
        "--format=csv,noheader"
    )
    lines = stdout.splitlines()
    assert status == 15 and lines[3] == LOST and len(lines) == 8
    assert [line.split(", ")[3] for line in lines if line != LOST] == [
        gpu_uuid("gpu-01", i) for i in (0, 1, 2, 4, 5, 6, 7)
    ]
    assert h.machine.snapshot()["gpus"][3]["lost"] is True


def test_an_uncorrectable_ecc_error_counts_and_corrected_ones_keep_coming() -> None:
    h = host()
    pid = worker_pid(h, 2)
    h.machine.set_fault("ecc_uncorrectable")
    assert h.out(ERRORS)[2] == "2, 00000000:3A:00.0, 2, [N/A]"
    assert h.out(ERRORS)[1] == "1, 00000000:2A:00.0, 0, [N/A]"
    volatile = (
        "nvidia-smi --query-gpu=ecc.errors.corrected.volatile.total,"
        "ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.aggregate.total "
        "--format=csv,noheader -i 2"
    )
    assert h.out(volatile) == ["0, 2, 0"]
    h.advance(3 * 60 + 5)
    assert h.out(volatile) == ["3, 2, 3"]
    assert h.out("nvidia-smi")[16].endswith("|                    2 |")  # Volatile Uncorr. ECC
    assert h.out(XIDS) == [
        kernel(
            f"NVRM: Xid (PCI:0000:3a:00): 48, pid={pid}, name=python3, Ch 00000008, An "
            "uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
            "partition 6, subpartition 0."
        )
    ]


def test_row_remapping_on_hbm_boards() -> None:
    h = host("h100-sxm")
    h.serve()
    pid = worker_pid(h, 5)
    h.machine.set_fault("row_remap_pending")
    assert h.out(REMAPPED)[5] == f"{gpu_uuid('gpu-01', 5)}, 0, 1, 1, 0"
    assert h.out(REMAPPED)[4] == f"{gpu_uuid('gpu-01', 4)}, 0, 0, 0, 0"
    h.advance(60)
    h.machine.set_fault("row_remap_failure")
    assert h.out(REMAPPED)[5] == f"{gpu_uuid('gpu-01', 5)}, 0, 1, 1, 1"
    h.machine.set_fault("row_remap_pending", False)
    assert h.out(REMAPPED)[5] == f"{gpu_uuid('gpu-01', 5)}, 0, 0, 0, 1"
    assert h.out(XIDS) == [  # switching the first off takes nothing back
        kernel(
            f"NVRM: Xid (PCI:0000:ab:00): 63, pid={pid}, name=python3, Row Remapper: New row "
            "marked for remapping, reset gpu to activate.",
            after=1,  # serve() took a second
        ),
        kernel(
            f"NVRM: Xid (PCI:0000:ab:00): 64, pid={pid}, name=python3, Row Remapper Error: row "
            "remap failed, reset gpu to activate.",
            after=61,
        ),
    ]


def test_row_remapping_faults_do_nothing_on_gddr_boards() -> None:
    for profile in ("rtx-pro-6000", "l40s"):
        h = host(profile)
        before = h.out(REMAPPED)
        h.machine.set_fault("row_remap_pending")
        h.machine.set_fault("row_remap_failure")
        assert h.out(REMAPPED) == before
        assert all(line.endswith(", [N/A], [N/A], [N/A], [N/A]") for line in before)
        assert h.run(XIDS) == ("", "", 0)


def test_nvlink_errors_grow_on_one_link() -> None:
    h = host("h100-sxm")
    h.serve()
    pid = worker_pid(h, 1)
    h.machine.set_fault("nvlink_errors")
    link4 = [
        "\t Link 4: Replay Errors: 0",
        "\t Link 4: Recovery Errors: 0",
        "\t Link 4: CRC Errors: 0",
    ]
    errors = h.out("nvidia-smi nvlink -e -i 1")
    assert errors[13:16] == link4
    h.advance(2 * 60)
    errors = h.out("nvidia-smi nvlink -e -i 1")
    assert errors[13:16] == [
        "\t Link 4: Replay Errors: 6",
        "\t Link 4: Recovery Errors: 0",
        "\t Link 4: CRC Errors: 6",
    ]
    assert errors[16] == "\t Link 5: Replay Errors: 0"
    assert h.out("nvidia-smi nvlink -e -i 2")[13:16] == link4
    assert h.out("nvidia-smi nvlink -s -i 1")[5] == "\t Link 4: 26.562 GB/s"
    assert h.out(XIDS) == [
        kernel(
            f"NVRM: Xid (PCI:0000:2a:00): 74, pid={pid}, name=python3, NVLink: fatal error "
            "detected on link 4(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
            after=1,
        )
    ]


def test_nvlink_faults_do_nothing_on_pcie_boards() -> None:
    h = host()
    h.machine.set_fault("nvlink_errors")
    h.machine.set_fault("nvlink_down")
    assert h.run("nvidia-smi nvlink -e") == ("", "", 0)
    assert h.run("nvidia-smi nvlink -s") == ("", "", 0)
    assert h.run(XIDS) == ("", "", 0)


def test_a_link_that_is_down_is_inactive() -> None:
    h = host("h200")
    h.machine.set_fault("nvlink_down")
    status = h.out("nvidia-smi nvlink -s -i 1")
    assert status[4:7] == [
        "\t Link 3: 26.562 GB/s",
        "\t Link 4: <inactive>",
        "\t Link 5: 26.562 GB/s",
    ]
    assert h.out("nvidia-smi nvlink -e -i 1")[13] == "\t Link 4: Replay Errors: 0"
    topo = h.out("nvidia-smi topo -m")
    assert topo[1].startswith("GPU0\t X \tNV17\tNV18\t")
    assert topo[2].startswith("GPU1\tNV17\t X \tNV17\tNV17\tNV17\tNV17\tNV17\tNV17\tPXB\t")
    assert h.run(XIDS) == ("", "", 0)


TINY = "/models/test/tiny"
PCIE = (
    "nvidia-smi --query-gpu=index,pcie.link.gen.current,pcie.link.gen.max,"
    "pcie.link.width.current,pcie.link.width.max --format=csv,noheader"
)


@pytest.mark.parametrize(("profile", "gpu", "gen_max"), [("rtx-pro-6000", 6, 5), ("l40s", 2, 4)])
def test_a_downtrained_link_runs_at_half_width_and_gen3(
    profile: str, gpu: int, gen_max: int
) -> None:
    h = host(profile)
    if profile == "l40s":
        h.machine.disk[TINY] = 16.0
        h.serve(TINY, tensor_parallel_size=4)  # the default model needs eight GPUs
    h.machine.set_fault("pcie_downtrained")
    h.machine.set_inflight(16)  # under load: the other links train up to their max
    lines = h.out(PCIE)
    assert lines[gpu] == f"{gpu}, 3, {gen_max}, 8, 16"
    assert lines[gpu - 1] == f"{gpu - 1}, {gen_max}, {gen_max}, 16, 16"


def test_hardware_slowdown_halves_the_sm_clock() -> None:
    h = host()
    query = "nvidia-smi --query-gpu=clocks_event_reasons.active,clocks.sm --format=csv,noheader"
    assert h.out(query)[4] == "0x0000000000000001, 1200 MHz"  # idle, memory held
    h.machine.set_fault("hw_slowdown")
    assert h.out(query)[4] == "0x0000000000000049, 600 MHz"
    assert h.out(query)[3] == "0x0000000000000001, 1200 MHz"
    h.machine.set_inflight(16)
    reasons, clock = h.out(query)[4].split(", ")
    assert int(reasons, 16) & 0x48 == 0x48 and 1150 <= int(clock.split()[0]) <= 1250


def test_persistence_off_on_every_gpu() -> None:
    h = host()
    h.machine.set_fault("persistence_off")
    assert (
        h.out("nvidia-smi --query-gpu=persistence_mode --format=csv,noheader") == ["Disabled"] * 8
    )
    assert h.out("nvidia-smi")[8].startswith("|   0  NVIDIA RTX PRO 6000 Bla...    Off  |")


def _metric(h: Host, name: str) -> float:
    lines = h.out("curl -s http://127.0.0.1:8000/metrics")
    return float(next(line for line in lines if line.startswith(name + "{")).rsplit(" ", 1)[1])


def test_an_engine_core_that_died_leaves_a_live_api_server() -> None:
    h = host(time_scale=0.05)  # curl -m counts host seconds, 20 times faster
    machine = h.machine
    body = json.dumps({"model": "kimi-k2.5", "prompt": "Hi", "max_tokens": 3})
    complete = (
        f"curl -sS -m 10 http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' "
        f"-d '{body}'"
    )
    assert '"object":"text_completion"' in h.out(complete)[0]
    main_pid = machine.snapshot()["units"][UNIT]["main_pid"]
    generated = _metric(h, "vllm:generation_tokens_total")
    machine.set_fault("engine_core_died")
    state = machine.snapshot()
    assert state["units"][UNIT]["active_state"] == "active"
    assert state["units"][UNIT]["main_pid"] == main_pid
    assert state["compute_apps"] == []
    assert [g["memory_used_mib"] for g in state["gpus"]] == [g.idle_mib for g in machine.gpus]
    assert h.run("nvidia-smi --query-compute-apps=pid --format=csv,noheader") == ("", "", 0)
    in_unit = {p.pid for p in machine.processes() if p.unit == UNIT}
    assert in_unit == {main_pid}
    assert h.out("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health") == ["200"]
    assert '"id":"kimi-k2.5"' in h.out("curl -s http://127.0.0.1:8000/v1/models")[0]
    assert _metric(h, "vllm:num_requests_running") == 0
    assert _metric(h, "vllm:num_requests_waiting") == 0
    h.advance(1.5)  # 30 host seconds at this scale: three more requests waiting
    assert _metric(h, "vllm:num_requests_waiting") == 3
    stdout, stderr, status = h.run(complete)
    assert (stdout, status) == ("", 28)
    assert (
        stderr == "curl: (28) Operation timed out after 10000 milliseconds with 0 bytes received\n"
    )
    assert _metric(h, "vllm:generation_tokens_total") == generated
    machine.restart(machine.units[UNIT])  # a restart brings up a healthy engine
    h.advance(1.0)
    assert len(machine.compute_apps()) == 8
    assert '"object":"text_completion"' in h.out(complete)[0]


def test_switching_engine_core_died_off_revives_the_engine() -> None:
    h = host()
    h.machine.set_fault("engine_core_died")
    assert h.machine.compute_apps() == []
    h.machine.set_fault("engine_core_died", False)
    assert len(h.machine.compute_apps()) == 8


def test_a_fleet_can_start_with_gpu_faults(make_fleet: Callable[..., FleetHandle]) -> None:
    fleet = make_fleet(1, hardware={"gpu-01": "h100-sxm"}, faults={"gpu-01": ["nvlink_down"]})
    result = ssh(fleet, "gpu-01", "nvidia-smi nvlink -s -i 1")
    assert result.exit_status == 0
    assert str(result.stdout).splitlines()[5] == "\t Link 4: <inactive>"
    assert fleet.state("gpu-01")["faults"] == ["nvlink_down"]
