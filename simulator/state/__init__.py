"""The truth about one simulated GPU host: its GPUs, systemd units, engine processes and journal.

Time-dependent behaviour (a model finishing its load, a start failing with OOM, systemd
restarting a crashed unit) is evaluated lazily from timestamps whenever the state is read, so
a host costs nothing between commands and 500 of them need no timers. Everything here runs on
the simulator's event loop thread; nothing in this package blocks or does I/O.

`machine` holds a host's state and its public calls; `units` (units, runs, journal entries),
`unit_file` (reading a unit file), `lifecycle` (what systemd does with a unit's process),
`engine_start` (how a vLLM start ends), `hardware` (what a host's GPUs are, per profile),
`gpus` (specs, memory holders, readings), `gpu_faults` (what each GPU fault does),
`kernel_log` (the kernel's messages, the driver's Xids), `process_table` (PIDs, logins, `ps`)
and `snapshot` (the state as data) do the work.
"""

from __future__ import annotations

# How the engine reads a command line, where tests/deployments has always imported it from.
from ..vllm_cli import parse_vllm_argv
from .gpus import DRIVER_VERSION, GPU_COUNT, GPU_MEMORY_MIB, GpuReading
from .hardware import DEFAULT_HARDWARE, HardwareProfile
from .hardware import PROFILES as HARDWARE_PROFILES
from .machine import DEFAULT_LOAD_SECONDS, DEFAULT_SLOW_SECONDS, FAULTS, Machine
from .unit_file import parse_unit_file
from .units import JournalEntry, Run, Unit, systemd_timestamp

__all__ = [
    "DEFAULT_HARDWARE",
    "DEFAULT_LOAD_SECONDS",
    "DEFAULT_SLOW_SECONDS",
    "DRIVER_VERSION",
    "FAULTS",
    "GPU_COUNT",
    "GPU_MEMORY_MIB",
    "HARDWARE_PROFILES",
    "GpuReading",
    "HardwareProfile",
    "JournalEntry",
    "Machine",
    "Run",
    "Unit",
    "parse_unit_file",
    "parse_vllm_argv",
    "systemd_timestamp",
]
