"""Units as systemd holds them, each run of a unit's main process, and the journal's entries."""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass, field

from .. import catalog, processes
from ..processes import Process
from ..vllm_cli import EngineArgs, core_pid, core_title, worker_pid
from .gpus import ACTIVATION_MIB, CUDA_CONTEXT_MIB, GPU_COUNT, GPU_MEMORY_MIB, GpuSpec, gpu_title

# Failures that end the process before any engine or GPU worker was started.
EARLY_FAILURES = frozenset(
    {
        "exec",
        "help",
        "usage",
        "cli",
        "config",
        "port",
        "port_range",
        "world_size",
        "quantization",
        "missing_model",
        "missing_tokenizer",
        "dp_world_size",
    }
)


def systemd_timestamp(wall: float | None) -> str:
    """`Mon 2026-11-30 09:12:41 UTC`: how systemctl shows a timestamp on a host set to UTC."""
    if wall is None:
        return ""
    return _utc_timestamp(wall)


# A unit's few timestamps are shown again every probe round: formatted once each (enough
# entries for a few per host of the largest fleet one simulator process runs).
@functools.lru_cache(maxsize=32768)
def _utc_timestamp(wall: float) -> str:
    return dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%a %Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class UnitDefinition:
    """A unit as systemd loaded it (at daemon-reload or first use), not as it is on disk:
    the fragment's text and each drop-in's (path, text), and what they say together."""

    text: str
    dropins: tuple[tuple[str, str], ...] = ()
    fragment_path: str = ""
    description: str = ""
    exec_start: tuple[str, ...] = ()  # as written: `${VAR}` is expanded when the process starts
    environment: tuple[tuple[str, str], ...] = ()
    environment_files: tuple[tuple[str, bool], ...] = ()  # (path, optional)
    restart: str = "no"
    restart_sec: float = 0.1
    # How long systemd waits for the main process to exit after SIGTERM before SIGKILL
    # (TimeoutStopSec=, or TimeoutSec=; DefaultTimeoutStopSec=90s otherwise).
    timeout_stop_sec: float = 90.0
    bad_setting: str | None = None
    engine: EngineArgs | None = None  # None too when ExecStart= needs the environment

    @property
    def visible_gpus(self) -> tuple[int, ...]:
        return visible_gpus(dict(self.environment))


def visible_gpus(environment: dict[str, str], count: int = GPU_COUNT) -> tuple[int, ...]:
    """The GPUs CUDA_VISIBLE_DEVICES lets a process see (all `count` when it is unset)."""
    value = environment.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return tuple(range(count))
    try:
        return tuple(int(v) for v in value.split(",") if v.strip() != "")
    except ValueError:
        return ()


@dataclass
class Run:
    """One incarnation of a unit's main process, from spawn to exit."""

    pid: int
    started_mono: float
    started_wall: float
    engine: EngineArgs | None
    argv: tuple[str, ...] = ()  # ExecStart= as started, variables expanded
    environment: dict[str, str] = field(default_factory=dict)
    gpus: tuple[int, ...] = ()
    weights_mib: float = 0.0  # per GPU
    budget_mib: int = 0  # per GPU: gpu_memory_utilization * total
    gpu_total_mib: int = GPU_MEMORY_MIB  # memory.total of the host's GPUs
    visible: tuple[int, ...] = ()  # the GPUs CUDA_VISIBLE_DEVICES let it see
    free_mib: int | None = None  # free memory on its first GPU when that was too little
    ready_at: float | None = None  # monotonic; None when the run is doomed
    fail_at: float | None = None
    failure: str | None = None
    ready_logged: bool = False
    prompt_tokens: int = 0
    generation_tokens: int = 0
    finished: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0})
    # When its engine core and GPU workers died under the API server (engine_core_died).
    core_died_at: float | None = None
    # When SIGTERM made it drain (--shutdown-timeout): it answers only /metrics and /live then,
    # everything else with 503, while what is in flight finishes.
    draining_since: float | None = None

    def ready(self, now: float) -> bool:
        return self.ready_at is not None and now >= self.ready_at

    def serving(self, now: float) -> bool:
        """Loaded and answering HTTP (a headless engine loads but opens no port)."""
        return self.ready(now) and self.engine is not None and not self.engine.headless

    def processes(self, unit: str, binary: str) -> list[Process]:
        """The process tree in the unit's cgroup: the API server, EngineCores and workers."""
        engine = self.engine
        if engine is None:
            return [Process(self.pid, processes.comm(binary.rsplit("/", 1)[-1]), unit)]
        if engine.exit_status is not None or self.failure in EARLY_FAILURES or not self.gpus:
            return [Process(self.pid, "vllm", unit)]  # died before naming itself
        main = "VLLM::APIServer" if not engine.headless else "vllm"
        procs = {self.pid: Process(self.pid, processes.comm(main), unit)}
        if self.core_died_at is not None:
            return list(procs.values())  # its EngineCores and workers are gone
        for d in range(engine.data_parallel_size):
            pid = core_pid(engine, self.pid, d)
            procs[pid] = Process(pid, processes.comm(f"VLLM::{core_title(d)}"), unit)
        for rank in range(len(self.gpus)):
            pid = worker_pid(engine, self.pid, rank)
            procs.setdefault(pid, Process(pid, processes.comm(gpu_title(engine, rank)), unit))
        return sorted(procs.values(), key=lambda p: p.pid)

    def usage_mib(self, gpu: GpuSpec, now: float) -> int:
        """This process's memory on one GPU: context, then weights, then KV cache at ready."""
        if gpu.index not in self.gpus or self.core_died_at is not None:
            return 0
        if self.ready(now):
            return max(0, min(gpu.memory_mib, self.budget_mib) - gpu.idle_mib)
        end = self.ready_at if self.ready_at is not None else self.fail_at
        if end is None:
            return 0
        f = min(1.0, max(0.0, (now - self.started_mono) / max(end - self.started_mono, 1e-6)))
        if self.failure in EARLY_FAILURES:
            return 0
        if self.failure == "free_memory":
            return int(CUDA_CONTEXT_MIB * f)
        if self.failure == "oom":
            room = max(0, gpu.memory_mib - gpu.idle_mib - CUDA_CONTEXT_MIB - 400)
            return int(CUDA_CONTEXT_MIB + room * f)
        if self.failure == "crash":
            f *= 0.85  # dies during warmup, after the weights and before the KV cache
        if f < 0.05:
            return int(CUDA_CONTEXT_MIB * f / 0.05)
        if f < 0.8:
            return int(CUDA_CONTEXT_MIB + self.weights_mib * (f - 0.05) / 0.75)
        return int(CUDA_CONTEXT_MIB + self.weights_mib + ACTIVATION_MIB)


@dataclass
class Stopping:
    """A stop in progress: SIGTERM sent at `since` to a server draining until `drain_until`;
    systemd kills it at `kill_at`; `then_start` when the stop is a restart's."""

    since: float
    drain_until: float
    kill_at: float
    then_start: bool = False
    busy_until: float = 0.0  # the last time the engine was seen generating for a request


@dataclass
class Unit:
    name: str
    definition: UnitDefinition | None  # None: not found
    active_state: str = "inactive"
    sub_state: str = "dead"
    result: str = "success"
    n_restarts: int = 0
    active_enter_wall: float | None = None
    active_exit_wall: float | None = None
    run: Run | None = None
    restart_at: float | None = None  # monotonic time of a pending automatic restart
    last_exit: tuple[str, int, EngineArgs | None] | None = None  # failure, status, engine
    recent_starts: list[float] = field(default_factory=list)
    # The last main process, kept after it exits (ExecMainPID=, ...Code=, ...Status=).
    exec_main_pid: int = 0
    exec_main_start_wall: float | None = None
    exec_main_code: int = 0  # siginfo's code: 0 none yet, 1 exited, 2 killed
    exec_main_status: int = 0
    stopping: Stopping | None = None  # deactivating: a draining server on its way down
    stopping_ended_at: float = 0.0  # when the last stop ended (a restart starts from there)

    @property
    def main_pid(self) -> int:
        return self.run.pid if self.run else 0

    @property
    def load_state(self) -> str:
        if self.definition is None:
            return "not-found"
        return "bad-setting" if self.definition.bad_setting else "loaded"

    @property
    def fragment_path(self) -> str:
        if self.definition is None:
            return ""
        return self.definition.fragment_path or f"{catalog.UNIT_DIR}/{self.name}"


@dataclass(frozen=True)
class JournalEntry:
    wall: float
    unit: str | None
    ident: str
    pid: int
    message: str


def run_binary(unit: Unit) -> str:
    """The program the unit's ExecStart= runs ("" when it has none)."""
    if unit.run is not None and unit.run.argv:
        return unit.run.argv[0]
    if unit.definition and unit.definition.exec_start:
        return unit.definition.exec_start[0]
    return ""
