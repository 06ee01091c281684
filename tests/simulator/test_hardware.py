"""Hardware profiles: what nvidia-smi prints on each kind of host, and what fits on it.

The default profile (8 x RTX PRO 6000 Blackwell Server Edition on PCIe) prints what every
simulated host printed before profiles; the others print what the real boards print.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from controlplane.management.commands.demo import demo_hardware
from simulator import catalog
from simulator.server import SimFleet
from simulator.state.gpus import gpu_uuid
from simulator.state.hardware import PROFILES, profile
from tests.fleet import FleetHandle, ssh
from tests.simulator.on_machine import host

SAMPLES = Path(__file__).resolve().parents[1] / "hosts" / "samples"
UNIT = catalog.DEFAULT_UNIT
LIMITS = (
    "nvidia-smi --query-gpu=index,name,count,memory.total,power.limit,clocks.max.sm,"
    "clocks.max.memory,pcie.link.gen.max,pcie.link.width.max,mig.mode.current "
    "--format=csv,noheader -i 0"
)
ERRORS = (
    "nvidia-smi --query-gpu=index,pci.bus_id,ecc.errors.uncorrected.aggregate.total,"
    "retired_pages.pending --format=csv,noheader"
)
REMAPPED = (
    "nvidia-smi --query-remapped-rows=gpu_uuid,remapped_rows.correctable,"
    "remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv,noheader"
)
BUSES_8 = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")


def uuid(index: int) -> str:
    return gpu_uuid("gpu-01", index)


def test_the_default_profile_prints_what_the_hosts_always_printed() -> None:
    rtx = host()
    assert rtx.out(LIMITS) == [
        "0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 8, 97887 MiB, 600.00 W, 3090 MHz, "
        "14001 MHz, 5, 16, Disabled"
    ]
    assert rtx.out("nvidia-smi -L")[0] == (
        f"GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: {uuid(0)})"
    )
    topo = (SAMPLES / "nvidia_smi_topo_8x_rtxpro6000_pcie.txt").read_text()
    assert rtx.run("nvidia-smi topo -m") == (topo, "", 0)
    details = rtx.out(
        "nvidia-smi --query-gpu=index,persistence_mode,ecc.mode.current,"
        "ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,"
        "pcie.link.width.current --format=csv,noheader -i 7"
    )
    assert details == ["7, Enabled, Enabled, 0, 0, 16"]
    screen = rtx.out("nvidia-smi")
    assert screen[8] == (
        "|   0  NVIDIA RTX PRO 6000 Bla...     On  |   00000000:18:00.0 Off |"
        "                    0 |"
    )
    assert screen[10] == "|" + " " * 41 + "|" + " " * 24 + "|             Disabled |"


def test_the_new_queries_on_the_default_profile() -> None:
    rtx = host()
    assert rtx.out(ERRORS) == [f"{i}, 00000000:{b}:00.0, 0, [N/A]" for i, b in enumerate(BUSES_8)]
    # GDDR7 has no row remapper.
    assert rtx.out(REMAPPED) == [f"{uuid(i)}, [N/A], [N/A], [N/A], [N/A]" for i in range(8)]
    assert rtx.run("nvidia-smi nvlink -s") == ("", "", 0)  # PCIe boards: nothing at all
    assert rtx.run("nvidia-smi nvlink --errorcounters") == ("", "", 0)
    assert rtx.out(
        "nvidia-smi --query-gpu=ecc.errors.corrected.aggregate.total,"
        "retired_pages.double_bit.count,retired_pages.single_bit_ecc.count --format=csv -i 0"
    ) == [
        "ecc.errors.corrected.aggregate.total, retired_pages.double_bit.count, "
        "retired_pages.single_bit_ecc.count",
        "0, [N/A], [N/A]",
    ]
    assert rtx.out(
        "nvidia-smi --query-remapped-rows=gpu_bus_id,gpu_name,remapped_rows.pending --format=csv"
    )[:2] == [
        "gpu_bus_id, gpu_name, remapped_rows.pending",
        "00000000:18:00.0, NVIDIA RTX PRO 6000 Blackwell Server Edition, [N/A]",
    ]
    stdout, _, status = rtx.run("nvidia-smi --query-remapped-rows=remapped_rows.bogus --format=csv")
    assert (stdout, status) == ('Field "remapped_rows.bogus" is not a valid field to query.\n\n', 2)
    assert rtx.run(f"{REMAPPED.split(' --format')[0]}")[2] == 2  # a format is required


def test_h100_sxm_is_an_hgx_board_with_nvlink_and_hbm() -> None:
    h100 = host("h100-sxm")
    assert h100.out(LIMITS) == [
        "0, NVIDIA H100 80GB HBM3, 8, 81559 MiB, 700.00 W, 1980 MHz, 2619 MHz, 5, 16, Disabled"
    ]
    topo = re.sub(r"\x1b\[\d+m", "", (SAMPLES / "nvidia_smi_topo_8x_h100_nvlink.txt").read_text())
    assert h100.run("nvidia-smi topo -m") == (topo, "", 0)
    status = h100.out("nvidia-smi nvlink -s")
    assert len(status) == 8 * 19
    assert status[:3] == [
        f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {uuid(0)})",
        "\t Link 0: 26.562 GB/s",
        "\t Link 1: 26.562 GB/s",
    ]
    assert status[18:20] == [
        "\t Link 17: 26.562 GB/s",
        f"GPU 1: NVIDIA H100 80GB HBM3 (UUID: {uuid(1)})",
    ]
    errors = h100.out("nvidia-smi nvlink -e")
    assert len(errors) == 8 * (1 + 18 * 3)
    assert errors[:4] == [
        f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {uuid(0)})",
        "\t Link 0: Replay Errors: 0",
        "\t Link 0: Recovery Errors: 0",
        "\t Link 0: CRC Errors: 0",
    ]
    assert h100.out("nvidia-smi nvlink --status -i 3")[0].startswith("GPU 3: ")
    assert h100.out(REMAPPED) == [f"{uuid(i)}, 0, 0, 0, 0" for i in range(8)]
    assert h100.out(ERRORS)[3] == "3, 00000000:5D:00.0, 0, [N/A]"


def test_h200_and_l40s() -> None:
    h200 = host("h200")
    assert h200.out(LIMITS) == [
        "0, NVIDIA H200, 8, 143771 MiB, 700.00 W, 1980 MHz, 3201 MHz, 5, 16, Disabled"
    ]
    assert h200.out("nvidia-smi topo -m")[1].startswith("GPU0\t X \tNV18\tNV18\t")
    l40s = host("l40s")
    assert l40s.out(LIMITS) == [
        "0, NVIDIA L40S, 4, 46068 MiB, 350.00 W, 2520 MHz, 9001 MHz, 4, 16, [N/A]"
    ]
    assert l40s.out("nvidia-smi -L") == [
        f"GPU {i}: NVIDIA L40S (UUID: {uuid(i)})" for i in range(4)
    ]
    assert l40s.out("nvidia-smi topo -m")[:7] == [
        "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID",
        "GPU0\t X \tNODE\tSYS\tSYS\tNODE\tSYS\t0-47,96-143\t0\t\tN/A",
        "GPU1\tNODE\t X \tSYS\tSYS\tNODE\tSYS\t0-47,96-143\t0\t\tN/A",
        "GPU2\tSYS\tSYS\t X \tNODE\tSYS\tNODE\t48-95,144-191\t1\t\tN/A",
        "GPU3\tSYS\tSYS\tNODE\t X \tSYS\tNODE\t48-95,144-191\t1\t\tN/A",
        "NIC0\tNODE\tNODE\tSYS\tSYS\t X \tSYS\t\t\t\t",
        "NIC1\tSYS\tSYS\tNODE\tNODE\tSYS\t X \t\t\t\t",
    ]
    assert l40s.out(ERRORS) == [
        "0, 00000000:18:00.0, 0, [N/A]",
        "1, 00000000:3A:00.0, 0, [N/A]",
        "2, 00000000:9A:00.0, 0, [N/A]",
        "3, 00000000:BA:00.0, 0, [N/A]",
    ]
    assert l40s.out(REMAPPED) == [f"{uuid(i)}, [N/A], [N/A], [N/A], [N/A]" for i in range(4)]
    assert l40s.run("nvidia-smi nvlink -s") == ("", "", 0)
    stdout, _, status = l40s.run("nvidia-smi -i 4")
    assert (stdout, status) == ("No devices were found matching the provided id: 4\n", 6)


def test_h100_mig_lists_its_mig_devices_and_no_utilization() -> None:
    mig = host("h100-mig")
    lines = mig.out("nvidia-smi -L")
    assert len(lines) == 8 * 3
    assert lines[0] == f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {uuid(0)})"
    uuid_re = r"MIG-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}"
    for n in (0, 1):
        assert re.fullmatch(rf"  MIG 3g\.40gb     Device  {n}: \(UUID: {uuid_re}\)", lines[1 + n])
    assert lines[1] != lines[2] and lines[1] not in mig.out("nvidia-smi -L -i 1")
    assert mig.out(
        "nvidia-smi --query-gpu=index,mig.mode.current,utilization.gpu,utilization.memory "
        "--format=csv,noheader -i 0"
    ) == ["0, Enabled, [N/A], [N/A]"]
    assert mig.out("nvidia-smi")[10].endswith("|              Enabled |")


def test_what_fits_is_the_profiles_memory() -> None:
    """The default unit (Kimi-K2.5 NVFP4, 595 GiB over tensor-parallel 8) fits 8 x 96 GB and
    8 x 141 GB, not 8 x 80 GB (OOM while loading), and cannot start on four GPUs."""
    h200 = host("h200")
    state = h200.machine.snapshot()
    assert state["units"][UNIT]["phase"] == "ready"
    assert state["hardware"]["profile"] == "h200"
    assert [g["memory_used_mib"] for g in state["gpus"]] == [int(0.92 * 143771)] * 8
    h100 = host("h100-sxm")
    h100.advance(5)
    state = h100.machine.snapshot()
    assert state["units"][UNIT]["active_state"] == "failed"
    assert state["units"][UNIT]["last_exit"]["failure"] == "oom"
    journal = h100.out(f"journalctl -u {UNIT} -o cat")
    assert any("GPU 0 has a total capacity of 79.65 GiB" in line for line in journal)
    h100.serve()  # Qwen3-235B FP8: 27.5 GiB a GPU
    assert len(h100.out("nvidia-smi --query-compute-apps=pid --format=csv,noheader")) == 8
    l40s = host("l40s")
    l40s.advance(5)
    assert l40s.machine.snapshot()["units"][UNIT]["last_exit"]["failure"] == "world_size"


def test_every_demo_host_serves_the_deployed_model() -> None:
    assert demo_hardware(4) == ["gpu-02=h200"]
    assert demo_hardware(1) == []
    assert demo_hardware(120) == ["gpu-002=h200"]
    for entry in demo_hardware(4):
        name, _, key = entry.partition("=")
        state = host(key, name=name).machine.snapshot()
        assert state["units"][UNIT]["phase"] == "ready", key


def test_profiles_are_chosen_per_host(make_fleet: Callable[..., FleetHandle]) -> None:
    fleet = make_fleet(2, hardware={"gpu-02": "h200"})

    def stdout(name: str, command: str) -> str:
        return str(ssh(fleet, name, command).stdout)

    assert stdout("gpu-01", "nvidia-smi -L").startswith(
        "GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition"
    )
    assert stdout("gpu-02", "nvidia-smi -L").startswith("GPU 0: NVIDIA H200 (UUID: ")
    assert fleet.state("gpu-02")["hardware"]["gpu_name"] == "NVIDIA H200"
    assert '"profile": "h200"' in stdout("gpu-02", "simctl status")


def test_unknown_profiles_and_hosts_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown hardware profile 'a100'; known: rtx-pro-6000"):
        profile("a100")
    with pytest.raises(KeyError, match="gpu-09"):
        SimFleet(2, state_dir=tmp_path, hardware={"gpu-09": "h200"})
    with pytest.raises(ValueError, match="a100"):
        SimFleet(2, state_dir=tmp_path, hardware={"gpu-01": "a100"})
    assert set(PROFILES) == {"rtx-pro-6000", "h100-sxm", "h200", "l40s", "h100-mig"}


@pytest.mark.parametrize(
    "value", ["gpu-09=h200", "gpu-01=a100", "gpu-01", "gpu-01=h200,gpu-02=h200"]
)
def test_simfleet_refuses_a_bad_hardware_option(value: str) -> None:
    with pytest.raises(CommandError, match="HOST=PROFILE"):
        call_command("simfleet", "--hosts", "2", "--hardware", value)


def test_simfleet_refuses_two_profiles_for_one_host() -> None:
    with pytest.raises(CommandError, match="gpu-01 has two profiles"):
        call_command(
            "simfleet", "--hosts", "2", "--hardware", "gpu-01=h200", "--hardware", "gpu-01=l40s"
        )
