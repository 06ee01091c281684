"""nvidia-smi beyond memory and power: per-GPU details, driver and CUDA versions, topology."""

from __future__ import annotations

from pathlib import Path

import pytest

from hosts.commands import GPU_DETAIL_FIELDS
from hosts.parsers import (
    ParseError,
    clock_event_reason_names,
    parse_gpu_details,
    parse_smi_version,
    parse_topology,
    topology_summary,
)
from hosts.state import GpuDetails

SAMPLES = Path(__file__).parent / "samples"
DRIVER_FAILED = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n\n"
)


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


# --- the details query ---------------------------------------------------------------------


def test_details_of_an_8_gpu_h100_host() -> None:
    gpus = parse_gpu_details(sample("nvidia_smi_details_8x_h100.csv"))

    assert [g.index for g in gpus] == list(range(8))
    assert gpus[0] == GpuDetails(
        index=0,
        driver_version="580.95.05",
        pstate="P0",
        persistence_mode=True,
        ecc_corrected_volatile=0,
        ecc_uncorrected_volatile=0,
        clock_sm_mhz=1980,
        clock_mem_mhz=2619,
        clock_max_sm_mhz=1980,
        clock_event_reasons=0,
        clock_event_reason_names=[],
        pcie_gen_current=5,
        pcie_gen_max=5,
        pcie_width_current=16,
        pcie_width_max=16,
    )
    assert gpus[3].clock_event_reason_names == ["SW power cap"]
    # GPU 7: thermal throttling, corrected ECC errors and a link that trained down to Gen4 x8
    assert gpus[7].clock_event_reason_names == ["SW thermal slowdown", "HW thermal slowdown"]
    assert gpus[7].ecc_corrected_volatile == 2
    assert (gpus[7].pcie_gen_current, gpus[7].pcie_width_current) == (4, 8)


def test_gpus_without_ecc_read_none_not_zero() -> None:
    gpus = parse_gpu_details(sample("nvidia_smi_details_2x_rtx4090.csv"))

    assert [g.ecc_corrected_volatile for g in gpus] == [None, None]
    assert [g.persistence_mode for g in gpus] == [False, False]
    assert gpus[0].clock_event_reason_names == ["GPU idle"] and gpus[0].pcie_gen_current == 1


def test_details_with_every_field_unsupported() -> None:
    row = "0, [N/A], [N/A], [Not Supported], [N/A], [N/A], [N/A], [N/A], [N/A], [Not Supported]"
    row += ", [N/A], [N/A], [N/A], [N/A]\n"

    (gpu,) = parse_gpu_details(row)

    assert gpu == GpuDetails(index=0)


def test_an_older_driver_refusing_the_field_is_named() -> None:
    with pytest.raises(ParseError, match=r"clocks_throttle_reasons\.active"):
        parse_gpu_details(sample("nvidia_smi_details_old_driver.txt"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (DRIVER_FAILED, "NVIDIA-SMI has failed"),
        ("", "printed nothing"),
        ("0, 580.95.05, P0\n", "expected 14 columns"),
        (", ".join(GPU_DETAIL_FIELDS) + "\n", "header"),
        (
            "0, 580.95.05, P0, Enabled, 0, 0, 1980 GHz, 2619 MHz, 1980 MHz, 0x0, 5, 5, 16, 16\n",
            "MHz",
        ),
        (
            "0, 580.95.05, P0, On, 0, 0, 1980 MHz, 2619 MHz, 1980 MHz, 0x0, 5, 5, 16, 16\n",
            "persistence",
        ),
        ("0, 580.95.05, P0, Enabled, 0, 0, 1980 MHz, 2619 MHz, 1980 MHz, 4, 5, 5, 16, 16\n", "hex"),
        (
            "0, 580.95.05, Q9, Enabled, 0, 0, 1980 MHz, 2619 MHz, 1980 MHz, 0x0, 5, 5, 16, 16\n",
            "performance",
        ),
    ],
)
def test_details_it_cannot_read_raise(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_gpu_details(text)


def test_a_lost_gpu_is_skipped_and_described_when_asked() -> None:
    lines = sample("nvidia_smi_details_8x_h100.csv").splitlines(keepends=True)
    lost = "Unable to determine the device handle for GPU0000:CB:00.0: Unknown Error\n"
    problems: list[str] = []

    gpus = parse_gpu_details("".join([*lines[:2], lost, *lines[3:]]), problems=problems)

    assert [g.index for g in gpus] == [0, 1, 3, 4, 5, 6, 7]
    assert problems == [f"line 3: {lost.strip()}"]


def test_clock_event_reasons_decode_every_bit() -> None:
    assert clock_event_reason_names(0) == []
    assert clock_event_reason_names(0x1FF) == [
        "GPU idle",
        "applications clocks setting",
        "SW power cap",
        "HW slowdown",
        "sync boost",
        "SW thermal slowdown",
        "HW thermal slowdown",
        "HW power brake slowdown",
        "display clock setting",
    ]
    assert clock_event_reason_names(0x400) == ["unknown reason 0x400"]


# --- nvidia-smi --version ------------------------------------------------------------------


def test_version_of_driver_580() -> None:
    assert parse_smi_version(sample("nvidia_smi_version_580.txt")) == ("580.95.05", "13.0")


def test_a_driver_without_the_option_is_no_version_not_a_problem() -> None:
    assert parse_smi_version(sample("nvidia_smi_version_unsupported.txt")) == (None, None)


def test_version_with_cuda_unavailable() -> None:
    text = "NVIDIA-SMI version  : 580.95.05\nDRIVER version      : 580.95.05\nCUDA Version : N/A\n"

    assert parse_smi_version(text) == ("580.95.05", None)


@pytest.mark.parametrize("text", [DRIVER_FAILED, "", "bash: nvidia-smi: command not found\n"])
def test_version_unreadable_raises(text: str) -> None:
    with pytest.raises(ParseError):
        parse_smi_version(text)


# --- nvidia-smi topo -m --------------------------------------------------------------------


def test_topology_of_eight_pcie_gpus_on_two_sockets() -> None:
    topology = parse_topology(sample("nvidia_smi_topo_8x_rtxpro6000_pcie.txt"))

    assert len(topology.links) == 8 and all(len(row) == 8 for row in topology.links)
    assert [topology.links[i][i] for i in range(8)] == ["X"] * 8
    assert topology.links[0][:4] == ["X", "NODE", "NODE", "NODE"]
    assert topology.links[0][4:] == ["SYS"] * 4 and topology.links[5][1] == "SYS"
    assert not topology.nvlink
    assert topology.summary == "PCIe (SYS/NODE) between all GPUs, no NVLink"
    assert topology.cpu_affinity == ["0-47,96-143"] * 4 + ["48-95,144-191"] * 4
    assert topology.numa_affinity == ["0"] * 4 + ["1"] * 4


def test_topology_of_nvlinked_gpus_with_nics_and_an_underlined_header() -> None:
    text = sample("nvidia_smi_topo_8x_h100_nvlink.txt")
    assert "\x1b[4m" in text

    topology = parse_topology(text)

    assert topology.links[2] == ["NV18", "NV18", "X", "NV18", "NV18", "NV18", "NV18", "NV18"]
    assert topology.nvlink and topology.summary == "NVLink (NV18) between all GPUs"
    assert topology.numa_affinity[7] == "1"


def test_topology_summary_of_mixed_links() -> None:
    links = [["X", "NV4", "SYS"], ["NV4", "X", "SYS"], ["SYS", "SYS", "X"]]

    assert topology_summary(links) == "NVLink (NV4) between some GPUs, PCIe (SYS) between others"
    assert topology_summary([["X"]]) == "one GPU"


@pytest.mark.parametrize(
    "text",
    [
        DRIVER_FAILED,
        "",
        "No devices were found\n",
        "\tGPU0\tGPU1\nGPU0\t X \tNODE\n",  # GPU1's row is missing
        "\tGPU0\tGPU1\nGPU0\t X \tFAST\nGPU1\tFAST\t X \n",
        "\tGPU0\tGPU1\nGPU0\tNODE\tNODE\nGPU1\tNODE\t X \n",  # GPU0 does not reach itself as X
        "GPU0 GPU1\nGPU0 X NODE\n",  # spaces, not tabs: not what nvidia-smi prints
    ],
)
def test_topology_it_cannot_read_raises(text: str) -> None:
    with pytest.raises(ParseError):
        parse_topology(text)
