"""nvidia-smi's default screen (no options), for people who type it by hand.

The GPUs as the host's hardware profile has them: persistence mode, ECC's uncorrected count
(N/A without ECC), MIG mode (N/A on a board without MIG) and utilization (N/A under MIG). A
GPU that fell off the bus is missing from the table; nvidia-smi says so above it.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from ..state import DRIVER_VERSION, GpuReading

if TYPE_CHECKING:
    from ..state import Machine
    from ..state.gpus import AppReading

_BAR = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
_FULL = "+" + "-" * 89 + "+"


def _cells(a: str, b: str, c: str) -> str:
    return f"|{a:<41}|{b:<24}|{c:<22}|"


def _wide(text: str) -> str:
    return f"|{text:<89}|"


def smi_table(machine: Machine, readings: list[GpuReading], apps: list[AppReading]) -> str:
    """The screen: the driver's banner, a block per GPU, then the processes (`readings`
    without the lost GPUs, `apps` the processes on the others)."""
    now = dt.datetime.fromtimestamp(machine.wall(), dt.UTC).strftime("%a %b %d %H:%M:%S %Y")
    lines = [
        f"{now}       ",
        _FULL,
        _wide(
            f" NVIDIA-SMI {DRIVER_VERSION:<22} Driver Version: {DRIVER_VERSION:<14} "
            "CUDA Version: 13.0"
        ),
        _BAR,
        _cells(
            " GPU  Name                 Persistence-M",
            " Bus-Id          Disp.A",
            " Volatile Uncorr. ECC",
        ),
        _cells(
            " Fan  Temp   Perf          Pwr:Usage/Cap",
            "           Memory-Usage",
            " GPU-Util  Compute M.",
        ),
        _cells("", "", "               MIG M."),
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]
    for r in readings:
        lines += _gpu_rows(r)
    return "\n".join(lines + _process_rows(apps)) + "\n"


def _gpu_rows(r: GpuReading) -> list[str]:
    name = r.name[:23] + "..." if len(r.name) > 26 else r.name
    power = f"{round(r.power_draw_w)}W /  {round(r.power_limit_w)}W"
    memory = f"{r.memory_used_mib}MiB /  {r.memory_total_mib}MiB"
    util = "N/A" if r.hardware.mig_enabled else f"{r.utilization_pct}%"
    persistence = "On" if r.persistence else "Off"
    ecc = str(r.ecc_uncorrected) if r.hardware.ecc else "N/A"
    mig = r.hardware.mig_mode or "N/A"
    return [
        _cells(
            f" {r.index:>3}  {name:<26}    {persistence:>3}", f"   {r.bus_id} Off", f"{ecc:>21}"
        ),
        _cells(
            f" N/A   {r.temperature_c}C    {r.pstate:<3}{power:>23} ",
            f"{memory:>23}",
            f"{util:>8}      Default",
        ),
        _cells("", "", f"{mig:>21}"),
        _BAR,
    ]


def _process_rows(apps: list[AppReading]) -> list[str]:
    lines = [
        "",
        _FULL,
        _wide(" Processes:"),
        _wide("  GPU   GI   CI              PID   Type   Process name" + " " * 24 + "GPU Memory"),
        _wide(
            "        ID   ID                                                               Usage"
        ),
        "|" + "=" * 89 + "|",
    ]
    if not apps:
        lines.append(_wide("  No running processes found"))
    for app in apps:
        mem = f"{app.used_memory_mib}MiB"
        lines.append(
            _wide(
                f"  {app.gpu_index:>3}   N/A  N/A  {app.pid:>14}      C   {app.process_name:<33}"
                f"{mem:>13}"
            )
        )
    lines.append(_FULL)
    return lines
