"""A host's eight GPUs: what they are, who holds their memory, what nvidia-smi reads off them."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import processes
from ..vllm_cli import EngineArgs, worker_pid, worker_title

if TYPE_CHECKING:
    from .machine import Machine
    from .units import Run

GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
GPU_COUNT = 8
GPU_MEMORY_MIB = 97887
GPU_POWER_LIMIT_W = 600.0
DRIVER_VERSION = "580.95.05"
NVML_VERSION = "580.95"
CUDA_VERSION = "13.0"
CLOCK_MAX_SM_MHZ = 3090
CLOCK_MAX_MEM_MHZ = 14001  # GDDR7 at 28 Gbps, as nvidia-smi counts it
PCIE_MAX_GEN = 5
PCIE_WIDTH = 16
CUDA_CONTEXT_MIB = 620  # what a process holds on a GPU before it allocates anything
ACTIVATION_MIB = 1800  # vLLM's profiling peak on top of the weights


def stable_fraction(*parts: object) -> float:
    """A stable number in [0, 1) per host and purpose, so restarts reproduce the same fleet."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def gpu_uuid(host: str, index: int) -> str:
    h = hashlib.sha256(f"{host}:gpu:{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def gpu_title(engine: EngineArgs, rank: int) -> str:
    """The process name nvidia-smi shows for a GPU worker: its title, set with setproctitle."""
    return f"VLLM::{worker_title(engine, rank)}"


@dataclass(frozen=True)
class GpuSpec:
    index: int
    uuid: str
    idle_mib: int
    idle_power_w: float
    base_temp_c: int
    phase: float


def gpu_specs(host: str) -> tuple[GpuSpec, ...]:
    """Each GPU's own quirks (idle memory, power, temperature), stable per host."""
    return tuple(
        GpuSpec(
            index=i,
            uuid=gpu_uuid(host, i),
            idle_mib=int(stable_fraction(host, i, "idle-mib") * 6),
            idle_power_w=82.0 + 30.0 * stable_fraction(host, i, "power"),
            base_temp_c=31 + int(stable_fraction(host, i, "temp") * 11),
            phase=stable_fraction(host, i, "phase") * 2 * math.pi,
        )
        for i in range(GPU_COUNT)
    )


@dataclass(frozen=True)
class GpuReading:
    index: int
    uuid: str
    name: str
    memory_used_mib: int
    memory_total_mib: int
    power_draw_w: float
    power_limit_w: float
    utilization_pct: int
    temperature_c: int
    pstate: str
    clock_sm_mhz: int = 0
    clock_mem_mhz: int = 0
    pcie_gen: int = 1  # the link trains down to Gen1 when the GPU idles
    clock_event_reasons: int = 0  # NVML's bitmask: 0x1 idle, 0x4 SW power cap, ...


@dataclass(frozen=True)
class AppReading:
    pid: int
    process_name: str
    used_memory_mib: int
    gpu_index: int
    gpu_uuid: str
    unit: str


@dataclass(frozen=True)
class ForeignProcess:
    """A process outside every deployed unit, holding memory on one GPU."""

    pid: int
    gpu: int
    held_mib: int  # what it allocated when it started (it never grows)
    comm: str = processes.FOREIGN_COMM


# --- who holds the memory ----------------------------------------------------------------------


def runs_usage(machine: Machine, gpu: GpuSpec, now: float, exclude: Run | None = None) -> int:
    return sum(
        u.run.usage_mib(gpu, now)
        for u in machine.units.values()
        if u.run is not None and u.run is not exclude
    )


def foreign_mib(machine: Machine, proc: ForeignProcess, now: float) -> int:
    """A foreign process's memory: what it allocated, never past what the GPU has left."""
    spec = machine.gpus[proc.gpu]
    room = GPU_MEMORY_MIB - spec.idle_mib - runs_usage(machine, spec, now)
    return max(0, min(proc.held_mib, room))


def foreign_usage(machine: Machine, gpu: GpuSpec, now: float) -> int:
    return sum(foreign_mib(machine, p, now) for p in machine.foreign_procs if p.gpu == gpu.index)


def compute_apps(machine: Machine, now: float) -> list[AppReading]:
    """Every process holding GPU memory: engine workers, and foreign ones under the fault."""
    apps = []
    for unit in machine.units.values():
        run = unit.run
        if run is None or run.engine is None:
            continue
        for rank, g in enumerate(run.gpus):
            used = run.usage_mib(machine.gpus[g], now)
            if used > 0:
                apps.append(
                    AppReading(
                        pid=worker_pid(run.engine, run.pid, rank),
                        process_name=gpu_title(run.engine, rank),
                        used_memory_mib=used,
                        gpu_index=g,
                        gpu_uuid=machine.gpus[g].uuid,
                        unit=unit.name,
                    )
                )
    scope = machine.foreign_login.scope if machine.foreign_login else ""
    for proc in machine.foreign_procs:
        used = foreign_mib(machine, proc, now)
        if used > 0:
            apps.append(
                AppReading(
                    pid=proc.pid,
                    process_name=proc.comm,
                    used_memory_mib=used,
                    gpu_index=proc.gpu,
                    gpu_uuid=machine.gpus[proc.gpu].uuid,
                    unit=scope,
                )
            )
    apps.sort(key=lambda a: (a.gpu_index, a.pid))
    return apps


# --- what the sensors say ----------------------------------------------------------------------


def _busy_gpus(machine: Machine, now: float) -> dict[int, float]:
    running = machine.inflight_running
    load = 0.0 if running <= 0 else min(1.0, 0.35 + running / 48)
    busy: dict[int, float] = {}
    if load:
        for unit in machine.units.values():
            if unit.run is not None and unit.run.ready(now) and unit.run.gpus:
                for g in unit.run.gpus:
                    busy[g] = load
    return busy


def gpu_readings(machine: Machine, now: float, wall: float) -> list[GpuReading]:
    """Memory, power, utilisation and temperature of every GPU, wobbling gently over time."""
    busy = _busy_gpus(machine, now)
    readings = []
    for gpu in machine.gpus:
        used_by_apps = runs_usage(machine, gpu, now) + foreign_usage(machine, gpu, now)
        readings.append(_reading(gpu, used_by_apps, busy.get(gpu.index, 0.0), wall))
    return readings


def _reading(gpu: GpuSpec, used_by_apps: int, load: float, wall: float) -> GpuReading:
    used = min(GPU_MEMORY_MIB, gpu.idle_mib + used_by_apps)
    wobble = math.sin(wall / 23.0 + gpu.phase) + 0.5 * math.sin(wall / 5.3 + 2 * gpu.phase)
    held = used_by_apps > 0
    if load:
        power = 330.0 + 240.0 * load + 9.0 * wobble
        util = int(min(100, max(1, 62 + 38 * load + 3 * wobble)))
        temp = gpu.base_temp_c + 18 + int(14 * load + wobble)
        pstate, sm, mem, gen = "P0", int(2407 + 40 * wobble), CLOCK_MAX_MEM_MHZ, PCIE_MAX_GEN
        reasons = 0x4 if power >= 0.95 * GPU_POWER_LIMIT_W else 0x0  # at the cap: SW power cap
    else:
        power = gpu.idle_power_w + (6.0 if held else 0.0) + 1.2 * wobble
        util = 0
        temp = min(45, max(30, gpu.base_temp_c + (2 if held else 0) + round(wobble / 1.5)))
        pstate = "P1" if held else "P8"
        sm, mem, gen = (1200, CLOCK_MAX_MEM_MHZ, PCIE_MAX_GEN) if held else (180, 405, 1)
        reasons = 0x1  # GPU idle
    return GpuReading(
        index=gpu.index,
        uuid=gpu.uuid,
        name=GPU_NAME,
        memory_used_mib=used,
        memory_total_mib=GPU_MEMORY_MIB,
        power_draw_w=round(min(GPU_POWER_LIMIT_W, power), 2),
        power_limit_w=GPU_POWER_LIMIT_W,
        utilization_pct=util,
        temperature_c=temp,
        pstate=pstate,
        clock_sm_mhz=sm,
        clock_mem_mhz=mem,
        pcie_gen=gen,
        clock_event_reasons=reasons,
    )
