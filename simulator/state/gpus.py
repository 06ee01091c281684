"""A host's GPUs: what they are, who holds their memory, what nvidia-smi reads off them.

What the GPUs are (name, memory, limits) is the host's hardware profile (`hardware`); what a
fault does to a reading is `gpu_faults` (the machine applies it).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import processes
from ..vllm_cli import EngineArgs, worker_pid, worker_title
from .hardware import DEFAULT_HARDWARE, HardwareProfile

if TYPE_CHECKING:
    from .machine import Machine
    from .units import Run

# The default profile's figures, under the names they had before hosts had profiles.
GPU_NAME = DEFAULT_HARDWARE.gpu_name
GPU_COUNT = DEFAULT_HARDWARE.gpu_count
GPU_MEMORY_MIB = DEFAULT_HARDWARE.memory_mib
DRIVER_VERSION = "580.95.05"
NVML_VERSION = "580.95"
CUDA_VERSION = "13.0"
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
    memory_mib: int = GPU_MEMORY_MIB  # memory.total


def gpu_specs(host: str, hardware: HardwareProfile = DEFAULT_HARDWARE) -> tuple[GpuSpec, ...]:
    """Each GPU's own quirks (idle memory, power, temperature), stable per host."""
    base, spread = hardware.idle_power_w
    return tuple(
        GpuSpec(
            index=i,
            uuid=gpu_uuid(host, i),
            idle_mib=int(stable_fraction(host, i, "idle-mib") * 6),
            idle_power_w=base + spread * stable_fraction(host, i, "power"),
            base_temp_c=31 + int(stable_fraction(host, i, "temp") * 11),
            phase=stable_fraction(host, i, "phase") * 2 * math.pi,
            memory_mib=hardware.memory_mib,
        )
        for i in range(hardware.gpu_count)
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
    bus_id: str = ""  # pci.bus_id
    pcie_width: int = 16
    persistence: bool = True
    ecc_corrected: int = 0  # volatile and aggregate alike (no errors before this boot)
    ecc_uncorrected: int = 0
    # Row remapper: (correctable, uncorrectable, pending, failure); None on GDDR boards.
    remapped_rows: tuple[int, int, int, int] | None = None
    lost: bool = False  # fallen off the bus: nvidia-smi cannot reach it
    hardware: HardwareProfile = DEFAULT_HARDWARE  # what the GPU is (not part of the snapshot)


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
    room = spec.memory_mib - spec.idle_mib - runs_usage(machine, spec, now)
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
    load = _load_of(machine.inflight_running)
    busy: dict[int, float] = {}
    if load:
        for unit in machine.units.values():
            if unit.run is not None and unit.run.ready(now) and unit.run.gpus:
                for g in unit.run.gpus:
                    busy[g] = load
    return busy


def _load_of(running: int) -> float:
    """How hard the GPUs work with `running` requests in flight (0: idle)."""
    return 0.0 if running <= 0 else min(1.0, 0.35 + running / 48)


def daily_running(wall: float) -> int:
    """Requests in flight at a wall-clock time on a typical day of an inference service:
    none in the small hours (UTC), a morning ramp, busiest in mid-afternoon (about 50)."""
    hours = (wall / 3600) % 24
    return max(0, round(38 * math.cos(2 * math.pi * (hours - 15) / 24) + 12))


def gpu_history(
    machine: Machine, *, start_wall: float, end_wall: float, every_seconds: float
) -> list[tuple[float, list[GpuReading]]]:
    """Every GPU's readings from `start_wall` to `end_wall`, `every_seconds` apart, as the
    host's probes would have read them had it served all along: the memory its engines hold
    once loaded (whatever loads now, settled), under the traffic of a typical day
    (daily_running), through the model the live readings use. For a demo whose GPU charts
    should not open on an empty day; nothing here changes the machine."""
    now = machine.tick()
    ready = [u.run.ready_at for u in machine.units.values() if u.run and u.run.ready_at]
    settled = max([now, *ready])
    held = {g.index: runs_usage(machine, g, settled) + foreign_usage(machine, g, settled)
            for g in machine.gpus}  # fmt: skip
    history = []
    steps = int((end_wall - start_wall) // every_seconds)
    for step in range(steps + 1):
        wall = start_wall + step * every_seconds
        load = _load_of(daily_running(wall))
        history.append((wall, [
            _reading(machine.hardware, g, held[g.index], load if held[g.index] else 0.0, wall)
            for g in machine.gpus
        ]))  # fmt: skip
    return history


def gpu_readings(machine: Machine, now: float, wall: float) -> list[GpuReading]:
    """Memory, power, utilisation and temperature of every GPU, wobbling gently over time."""
    busy = _busy_gpus(machine, now)
    hardware = machine.hardware
    readings = []
    for gpu in machine.gpus:
        used_by_apps = runs_usage(machine, gpu, now) + foreign_usage(machine, gpu, now)
        readings.append(_reading(hardware, gpu, used_by_apps, busy.get(gpu.index, 0.0), wall))
    return readings


def _reading(
    hw: HardwareProfile, gpu: GpuSpec, used_by_apps: int, load: float, wall: float
) -> GpuReading:
    used = min(hw.memory_mib, gpu.idle_mib + used_by_apps)
    wobble = math.sin(wall / 23.0 + gpu.phase) + 0.5 * math.sin(wall / 5.3 + 2 * gpu.phase)
    held = used_by_apps > 0
    if load:
        power = hw.load_power_w[0] + hw.load_power_w[1] * load + 9.0 * wobble
        util = int(min(100, max(1, 62 + 38 * load + 3 * wobble)))
        temp = gpu.base_temp_c + 18 + int(14 * load + wobble)
        pstate, sm = "P0", int(hw.busy_sm_mhz + 40 * wobble)
        mem, gen = hw.clock_max_mem_mhz, hw.pcie_gen_max
        reasons = 0x4 if power >= 0.95 * hw.power_limit_w else 0x0  # at the cap: SW power cap
    else:
        power = gpu.idle_power_w + (6.0 if held else 0.0) + 1.2 * wobble
        util = 0
        temp = min(45, max(30, gpu.base_temp_c + (2 if held else 0) + round(wobble / 1.5)))
        pstate = "P1" if held else "P8"
        if held:
            sm, mem, gen = hw.held_sm_mhz, hw.clock_max_mem_mhz, hw.pcie_gen_max
        else:
            sm, mem, gen = hw.idle_sm_mhz, hw.idle_mem_mhz, 1
        reasons = 0x1  # GPU idle
    return GpuReading(
        index=gpu.index,
        uuid=gpu.uuid,
        name=hw.gpu_name,
        memory_used_mib=used,
        memory_total_mib=hw.memory_mib,
        power_draw_w=round(min(hw.power_limit_w, power), 2),
        power_limit_w=hw.power_limit_w,
        utilization_pct=util,
        temperature_c=temp,
        pstate=pstate,
        clock_sm_mhz=sm,
        clock_mem_mhz=mem,
        pcie_gen=gen,
        clock_event_reasons=reasons,
        bus_id=hw.bus_id(gpu.index),
        pcie_width=hw.pcie_width_max,
        remapped_rows=(0, 0, 0, 0) if hw.row_remapping else None,
        hardware=hw,
    )
