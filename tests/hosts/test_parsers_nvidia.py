"""nvidia-smi's GPU and compute-app queries (hosts/parsers/nvidia.py)."""

from __future__ import annotations

import pytest

from hosts.parsers import (
    ParseError,
    parse_compute_apps,
    parse_gpu_csv,
)
from hosts.state import (
    ComputeApp,
    GpuState,
)
from tests.hosts.parser_samples import (
    SMI_DRIVER_FAILED,
    SMI_GPU_LOST,
    SMI_NO_DEVICES,
    SMI_NVML_MISMATCH,
    sample,
)


def test_gpu_csv_of_a_healthy_8_gpu_host() -> None:
    gpus = parse_gpu_csv(sample("nvidia_smi_8x_h100.csv"))

    assert [g.index for g in gpus] == list(range(8))
    assert gpus[0] == GpuState(
        index=0,
        uuid="GPU-3f2b9c1e-8a4d-5e6f-9a0b-1c2d3e4f5a60",
        name="NVIDIA H100 80GB HBM3",
        memory_used_mib=74586,
        memory_total_mib=81559,
        power_draw_w=312.45,
        power_limit_w=700.0,
        utilization_pct=87,
        temperature_c=54,
    )
    assert len({g.uuid for g in gpus}) == 8


@pytest.mark.parametrize(
    "missing", ["[N/A]", "[Not Supported]", "[Unknown Error]", "[GPU is lost]", "N/A"]
)
def test_gpu_csv_unavailable_values_become_none(missing: str) -> None:
    line = f"3, GPU-c4d5e6f7, NVIDIA A100-SXM4-80GB, {missing}, 81920 MiB, {missing}, "
    line += f"{missing}, {missing}, {missing}\n"

    (gpu,) = parse_gpu_csv(line)

    assert gpu == GpuState(
        index=3, uuid="GPU-c4d5e6f7", name="NVIDIA A100-SXM4-80GB", memory_total_mib=81920
    )


def test_gpu_csv_nounits() -> None:
    text = "0, GPU-3f2b9c1e, NVIDIA H100 80GB HBM3, 74586, 81559, 312.45, 700.00, 87, 54\n"

    (gpu,) = parse_gpu_csv(text)

    assert (gpu.memory_used_mib, gpu.power_draw_w, gpu.utilization_pct) == (74586, 312.45, 87)


def test_gpu_csv_follows_the_given_column_order() -> None:
    fields = ("uuid", "temperature.gpu", "index", "memory.used")

    (gpu,) = parse_gpu_csv("GPU-aa, 41, 5, 1024 MiB\n", fields)

    assert gpu == GpuState(index=5, uuid="GPU-aa", temperature_c=41, memory_used_mib=1024)


def test_gpu_csv_no_devices_is_zero_gpus() -> None:
    assert parse_gpu_csv(SMI_NO_DEVICES) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (SMI_DRIVER_FAILED, SMI_DRIVER_FAILED.strip()),
        (SMI_NVML_MISMATCH, "Failed to initialize NVML: Driver/library version mismatch"),
        ("Failed to initialize NVML: Unknown Error\n", "Failed to initialize NVML: Unknown Error"),
        ("bash: line 1: nvidia-smi: command not found\n", "nvidia-smi: command not found"),
        ("", "nvidia-smi printed nothing"),
        ("\n \n", "nvidia-smi printed nothing"),
    ],
)
def test_gpu_csv_driver_failures_raise_with_the_first_line(text: str, message: str) -> None:
    with pytest.raises(ParseError) as raised:
        parse_gpu_csv(text)

    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_gpu_csv_wrong_column_count_is_an_error_not_a_crash() -> None:
    text = "0, GPU-3f2b9c1e, NVIDIA H100 80GB HBM3, 74586 MiB, 81559 MiB\n"

    with pytest.raises(ParseError, match="expected 9 columns, got 5"):
        parse_gpu_csv(text)


def test_gpu_csv_collects_bad_rows_and_keeps_the_good_ones_when_asked() -> None:
    lines = sample("nvidia_smi_8x_h100.csv").splitlines(keepends=True)
    text = "".join(lines[:3]) + SMI_GPU_LOST + "".join(lines[4:6]) + "7, GPU-e8f9, cut\n"
    problems: list[str] = []

    gpus = parse_gpu_csv(text, problems=problems)

    assert [g.index for g in gpus] == [0, 1, 2, 4, 5]
    assert problems == [
        f"line 4: {SMI_GPU_LOST.strip()}",
        "line 7: expected 9 columns, got 3: '7, GPU-e8f9, cut'",
    ]


def test_gpu_csv_with_only_bad_rows_raises_even_when_collecting() -> None:
    with pytest.raises(ParseError, match=r"GPU0000:CB:00\.0"):
        parse_gpu_csv(SMI_GPU_LOST, problems=[])


@pytest.mark.parametrize(
    "line",
    [
        "0, GPU-a, H100, 74586 GiB, 81559 MiB, 312.45 W, 700.00 W, 87 %, 54",  # wrong unit
        "0, GPU-a, H100, lots, 81559 MiB, 312.45 W, 700.00 W, 87 %, 54",
        "[N/A], GPU-a, H100, 1 MiB, 81559 MiB, 312.45 W, 700.00 W, 87 %, 54",  # no index
        "index, uuid, name, memory.used [MiB], memory.total [MiB], power.draw [W], "
        "power.limit [W], utilization.gpu [%], temperature.gpu",  # header
    ],
)
def test_gpu_csv_rejects_values_it_cannot_read(line: str) -> None:
    with pytest.raises(ParseError):
        parse_gpu_csv(line + "\n")


def test_compute_apps() -> None:
    text = (
        "2314567, VLLM::EngineCore, 74560 MiB\n"
        "2314890, /usr/bin/python3, [N/A]\n"
        "2315001, python -m vllm.entrypoints.openai.api_server, --a,b, 512 MiB\n"
    )

    assert parse_compute_apps(text) == [
        ComputeApp(2314567, "VLLM::EngineCore", 74560),
        ComputeApp(2314890, "/usr/bin/python3", None),
        ComputeApp(2315001, "python -m vllm.entrypoints.openai.api_server, --a,b", 512),
    ]


@pytest.mark.parametrize("text", ["", "\n", "No running processes found\n", SMI_NO_DEVICES])
def test_compute_apps_none_running(text: str) -> None:
    assert parse_compute_apps(text) == []


@pytest.mark.parametrize(
    "text", [SMI_DRIVER_FAILED, SMI_NVML_MISMATCH, "abc, python, 1 MiB\n", "123\n"]
)
def test_compute_apps_unreadable(text: str) -> None:
    with pytest.raises(ParseError):
        parse_compute_apps(text)


def test_compute_apps_with_the_gpu_uuid_column() -> None:
    text = (
        "2314567, VLLM::Worker_TP0, 74560 MiB, GPU-3f2b9c1e-8a4d-5e6f-9a0b-1c2d3e4f5a60\n"
        "2314890, python3, [N/A], [N/A]\n"
        "2315001, python -m x, --a,b, 512 MiB, GPU-7d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6\n"
    )

    assert parse_compute_apps(text) == [
        ComputeApp(2314567, "VLLM::Worker_TP0", 74560, "GPU-3f2b9c1e-8a4d-5e6f-9a0b-1c2d3e4f5a60"),
        ComputeApp(2314890, "python3", None, None),
        ComputeApp(2315001, "python -m x, --a,b", 512, "GPU-7d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6"),
    ]
