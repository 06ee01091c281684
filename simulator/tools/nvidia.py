"""nvidia-smi: the GPU list, CSV queries of GPUs and compute apps, and the default screen."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..state import DRIVER_VERSION, GPU_COUNT, GpuReading
from ..state.gpus import CUDA_VERSION, NVML_VERSION
from .interface import Context, Result
from .nvidia_fields import APP_FIELDS, GPU_FIELDS, bus_id
from .nvidia_topo import topology_matrix

if TYPE_CHECKING:
    from ..state import Machine

DRIVER_ERROR = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    "that the latest NVIDIA driver is installed and running.\n\n"
)
_INVALID = "\nInvalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n"
_TAKES_VALUE = ("--query-gpu", "--query-compute-apps", "--format", "-i", "--id")


@dataclass
class _Options:
    query_gpu: list[str] | None = None
    query_apps: list[str] | None = None
    fmt: list[str] | None = None
    ids: set[int] | None = None
    list_gpus: bool = False
    version: bool = False


def nvidia_smi(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    machine = ctx.machine
    if "gpu_driver_error" in machine.faults:
        return result.out(DRIVER_ERROR).exit(9)
    if argv[1:2] == ["topo"]:
        return _topo(argv[2:])
    options = _options(argv[1:])
    if isinstance(options, Result):
        return options
    if options.version:
        return result.out(
            f"NVIDIA-SMI version  : {DRIVER_VERSION}\n"
            f"NVML version        : {NVML_VERSION}\n"
            f"DRIVER version      : {DRIVER_VERSION}\n"
            f"CUDA Version        : {CUDA_VERSION}\n"
        )
    ids = options.ids
    readings = [r for r in machine.gpu_readings() if ids is None or r.index in ids]
    if ids is not None and any(g >= GPU_COUNT or g < 0 for g in ids):
        bad = min(g for g in ids if g >= GPU_COUNT or g < 0)
        return result.out(f"No devices were found matching the provided id: {bad}\n").exit(6)
    if options.list_gpus:
        for r in readings:
            result.out(f"GPU {r.index}: {r.name} (UUID: {r.uuid})\n")
        return result
    if options.query_gpu is None and options.query_apps is None:
        return result.out(_smi_table(machine, readings))
    fmt = options.fmt
    if fmt is None or "csv" not in fmt:
        return result.out(_INVALID).exit(2)
    noheader, nounits = "noheader" in fmt, "nounits" in fmt
    if options.query_gpu is not None:
        return _query_gpus(options.query_gpu, readings, noheader, nounits)
    assert options.query_apps is not None
    return _query_apps(machine, options.query_apps, ids, noheader, nounits)


def _options(args: list[str]) -> _Options | Result:
    """What the command line asks for, or the error nvidia-smi exits with."""
    options = _Options()
    i = 0
    while i < len(args):
        arg = args[i]
        key, eq, value = arg.partition("=")
        if key in _TAKES_VALUE and not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
            i += 1
        if key == "--query-gpu":
            options.query_gpu = [f.strip() for f in value.split(",") if f.strip()]
        elif key == "--query-compute-apps":
            options.query_apps = [f.strip() for f in value.split(",") if f.strip()]
        elif key == "--format":
            options.fmt = [f.strip() for f in value.split(",")]
        elif key in ("-i", "--id"):
            try:
                options.ids = {int(v) for v in value.split(",")}
            except ValueError:
                return Result().out(f"Invalid GPU ID: {value}\n").exit(2)
        elif key in ("-L", "--list-gpus"):
            options.list_gpus = True
        elif key == "--version":
            options.version = True
        else:
            problem = _INVALID if key.startswith("-") else f"\nInvalid argument: {arg}\n"
            return Result().out(problem).exit(2)
        i += 1
    return options


def _query_gpus(
    names: list[str], readings: list[GpuReading], noheader: bool, nounits: bool
) -> Result:
    result = Result()
    columns = []
    for name in names:
        found = GPU_FIELDS.get(name)
        if found is None:
            return result.out(f'Field "{name}" is not a valid field to query.\n\n').exit(2)
        columns.append(found)
    if not noheader:
        result.out(", ".join(h for h, _f in columns) + "\n")
    for r in readings:
        result.out(", ".join(f(r, nounits) for _h, f in columns) + "\n")
    return result


def _query_apps(
    machine: Machine, names: list[str], ids: set[int] | None, noheader: bool, nounits: bool
) -> Result:
    result = Result()
    for name in names:
        if name not in APP_FIELDS:
            return result.out(f'Field "{name}" is not a valid field to query.\n\n').exit(2)
    if not noheader:
        result.out(", ".join(APP_FIELDS[n] for n in names) + "\n")
    # Only the gpu_name column needs the GPUs' readings (all the work of --query-gpu).
    gpus = {r.index: r for r in machine.gpu_readings()} if "gpu_name" in names else {}
    for app in machine.compute_apps():
        if ids is not None and app.gpu_index not in ids:
            continue
        memory = str(app.used_memory_mib) if nounits else f"{app.used_memory_mib} MiB"
        values = {
            "pid": str(app.pid),
            "process_name": app.process_name,
            "name": app.process_name,
            "used_memory": memory,
            "used_gpu_memory": memory,
            "gpu_uuid": app.gpu_uuid,
            "gpu_bus_id": bus_id(app.gpu_index),
            "gpu_name": gpus[app.gpu_index].name if gpus else "",
        }
        result.out(", ".join(values[n] for n in names) + "\n")
    return result


def _topo(args: list[str]) -> Result:
    """`nvidia-smi topo -m` (the matrix); other topo options are not simulated."""
    if args in (["-m"], ["--matrix"]):
        return Result().out(topology_matrix())
    return Result().out(_INVALID).exit(2)


# --- the default screen --------------------------------------------------------------------------

_BAR = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
_FULL = "+" + "-" * 89 + "+"


def _cells(a: str, b: str, c: str) -> str:
    return f"|{a:<41}|{b:<24}|{c:<22}|"


def _wide(text: str) -> str:
    return f"|{text:<89}|"


def _smi_table(machine: Machine, readings: list[GpuReading]) -> str:
    """The default nvidia-smi screen, for people who type it by hand."""
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
    return "\n".join(lines + _process_rows(machine)) + "\n"


def _gpu_rows(r: GpuReading) -> list[str]:
    name = r.name[:23] + "..." if len(r.name) > 26 else r.name
    power = f"{round(r.power_draw_w)}W /  {round(r.power_limit_w)}W"
    memory = f"{r.memory_used_mib}MiB /  {r.memory_total_mib}MiB"
    util = f"{r.utilization_pct}%"
    return [
        _cells(f" {r.index:>3}  {name:<26}     On", f"   {bus_id(r.index)} Off", f"{'0':>21}"),
        _cells(
            f" N/A   {r.temperature_c}C    {r.pstate:<3}{power:>23} ",
            f"{memory:>23}",
            f"{util:>8}      Default",
        ),
        _cells("", "", "             Disabled"),
        _BAR,
    ]


def _process_rows(machine: Machine) -> list[str]:
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
    apps = machine.compute_apps()
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
