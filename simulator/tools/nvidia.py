"""nvidia-smi: the GPU list, CSV queries of GPUs, compute apps and remapped rows, NVLink, the
topology, and the default screen (`nvidia_screen`).

A GPU that fell off the bus cannot be reached: every query prints nvidia-smi's line about it in
place of its row (or of its processes), the other GPUs as usual, and exits 15, nvidia-smi's
status for a GPU that is lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..state import DRIVER_VERSION, GpuReading, gpu_faults
from ..state.gpus import CUDA_VERSION, NVML_VERSION
from ..state.hardware import mig_uuid
from .interface import Context, Result
from .nvidia_fields import APP_FIELDS, GPU_FIELDS, REMAP_FIELDS
from .nvidia_nvlink import nvlink
from .nvidia_screen import smi_table
from .nvidia_topo import topology_matrix

if TYPE_CHECKING:
    from ..state import Machine

DRIVER_ERROR = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    "that the latest NVIDIA driver is installed and running.\n\n"
)
_INVALID = "\nInvalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n"
_TAKES_VALUE = (
    "--query-gpu",
    "--query-compute-apps",
    "--query-remapped-rows",
    "--format",
    "-i",
    "--id",
)
GPU_LOST_STATUS = 15  # nvidia-smi's exit status when a GPU has fallen off the bus


def lost_line(bus_id: str) -> str:
    """What nvidia-smi prints in place of a GPU that fell off the bus (`00000000:5D:00.0`)."""
    return (
        f"Unable to determine the device handle for GPU{bus_id[4:]}: GPU is lost.  "
        "Reboot the system to recover this GPU\n"
    )


@dataclass
class _Options:
    query_gpu: list[str] | None = None
    query_apps: list[str] | None = None
    query_remap: list[str] | None = None
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
        return _topo(machine, argv[2:])
    if argv[1:2] == ["nvlink"]:
        return nvlink(ctx.session, argv[2:])
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
    readings = [r for r in ctx.session.gpu_readings() if ids is None or r.index in ids]
    count = machine.hardware.gpu_count
    if ids is not None and any(g >= count or g < 0 for g in ids):
        bad = min(g for g in ids if g >= count or g < 0)
        return result.out(f"No devices were found matching the provided id: {bad}\n").exit(6)
    if any(r.lost for r in readings):
        result.exit(GPU_LOST_STATUS)
    if options.list_gpus:
        return _list_gpus(result, readings)
    if options.query_gpu is None and options.query_apps is None and options.query_remap is None:
        for r in readings:
            if r.lost:
                result.out(lost_line(r.bus_id))
        lost = gpu_faults.lost_gpus(machine)
        apps = [a for a in machine.compute_apps() if a.gpu_index not in lost]
        return result.out(smi_table(machine, [r for r in readings if not r.lost], apps))
    fmt = options.fmt
    if fmt is None or "csv" not in fmt:
        return Result().out(_INVALID).exit(2)
    noheader, nounits = "noheader" in fmt, "nounits" in fmt
    if options.query_gpu is not None:
        return _query_gpus(result, options.query_gpu, readings, noheader, nounits)
    if options.query_remap is not None:
        return _query_remapped(result, options.query_remap, readings, noheader)
    assert options.query_apps is not None
    return _query_apps(result, machine, options.query_apps, readings, noheader, nounits)


def _list_gpus(result: Result, readings: list[GpuReading]) -> Result:
    """`nvidia-smi -L`: each GPU, and under MIG each of its MIG devices."""
    for r in readings:
        if r.lost:
            result.out(lost_line(r.bus_id))
            continue
        result.out(f"GPU {r.index}: {r.name} (UUID: {r.uuid})\n")
        if r.hardware.mig_enabled:
            for n, kind in enumerate(r.hardware.mig_devices):
                result.out(f"  MIG {kind:<11} Device {n:>2}: (UUID: {mig_uuid(r.uuid, n)})\n")
    return result


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
        elif key == "--query-remapped-rows":
            options.query_remap = [f.strip() for f in value.split(",") if f.strip()]
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


def _invalid_field(name: str) -> Result:
    return Result().out(f'Field "{name}" is not a valid field to query.\n\n').exit(2)


def _query_gpus(
    result: Result, names: list[str], readings: list[GpuReading], noheader: bool, nounits: bool
) -> Result:
    columns = []
    for name in names:
        found = GPU_FIELDS.get(name)
        if found is None:
            return _invalid_field(name)
        columns.append(found)
    if not noheader:
        result.out(", ".join(h for h, _f in columns) + "\n")
    for r in readings:
        if r.lost:
            result.out(lost_line(r.bus_id))
        else:
            result.out(", ".join(f(r, nounits) for _h, f in columns) + "\n")
    return result


def _query_remapped(
    result: Result, names: list[str], readings: list[GpuReading], noheader: bool
) -> Result:
    """`--query-remapped-rows`: each GPU's row remapper (no units to leave out)."""
    for name in names:
        if name not in REMAP_FIELDS:
            return _invalid_field(name)
    if not noheader:
        result.out(", ".join(REMAP_FIELDS[n][0] for n in names) + "\n")
    for r in readings:
        if r.lost:
            result.out(lost_line(r.bus_id))
        else:
            result.out(", ".join(REMAP_FIELDS[n][1](r) for n in names) + "\n")
    return result


def _query_apps(
    result: Result,
    machine: Machine,
    names: list[str],
    readings: list[GpuReading],
    noheader: bool,
    nounits: bool,
) -> Result:
    """`--query-compute-apps`, GPU by GPU (`readings`: the GPUs asked for, by index)."""
    for name in names:
        if name not in APP_FIELDS:
            return _invalid_field(name)
    if not noheader:
        result.out(", ".join(APP_FIELDS[n] for n in names) + "\n")
    gpus = {r.index: r for r in readings}
    lost = {r.index for r in readings if r.lost}
    apps = machine.compute_apps()
    for index in sorted(gpus):
        if index in lost:
            result.out(lost_line(gpus[index].bus_id))
            continue
        for app in (a for a in apps if a.gpu_index == index):
            memory = str(app.used_memory_mib) if nounits else f"{app.used_memory_mib} MiB"
            values = {
                "pid": str(app.pid),
                "process_name": app.process_name,
                "name": app.process_name,
                "used_memory": memory,
                "used_gpu_memory": memory,
                "gpu_uuid": app.gpu_uuid,
                "gpu_bus_id": gpus[index].bus_id,
                "gpu_name": gpus[index].name,
            }
            result.out(", ".join(values[n] for n in names) + "\n")
    return result


def _topo(machine: Machine, args: list[str]) -> Result:
    """`nvidia-smi topo -m` (the matrix); other topo options are not simulated."""
    if args in (["-m"], ["--matrix"]):
        lost = gpu_faults.lost_gpus(machine)
        shown = [i for i in range(machine.hardware.gpu_count) if i not in lost]
        matrix = topology_matrix(
            machine.hardware,
            shown if lost else None,
            lambda index: gpu_faults.active_links(machine, index),
        )
        return Result().out(matrix)
    return Result().out(_INVALID).exit(2)
