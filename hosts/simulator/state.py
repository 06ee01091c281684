"""The truth about one simulated GPU host: its GPUs, systemd units, engine processes and journal.

Time-dependent behaviour (a model finishing its load, a start failing with OOM, systemd
restarting a crashed unit) is evaluated lazily from timestamps whenever the state is read, so
a host costs nothing between commands and 500 of them need no timers. Everything here runs on
the simulator's event loop thread; nothing in this module blocks or does I/O.
"""

from __future__ import annotations

import collections
import datetime as dt
import hashlib
import math
import random
import shlex
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import catalog, journal, processes
from .processes import Login, Process
from .vllm_cli import (
    EngineArgs,
    core_pid,
    core_title,
    parse_vllm_argv,
    worker_pid,
    worker_title,
)

GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
GPU_COUNT = 8
GPU_MEMORY_MIB = 97887
GPU_POWER_LIMIT_W = 600.0
DRIVER_VERSION = "580.95.05"
CUDA_CONTEXT_MIB = 620  # what a process holds on a GPU before it allocates anything
ACTIVATION_MIB = 1800  # vLLM's profiling peak on top of the weights
DEFAULT_LOAD_SECONDS = 3.0
DEFAULT_SLOW_SECONDS = 5.0
BOOT_LOAD_SECONDS = 214.0  # how long the model took to load when the fleet's hosts booted
JOURNAL_MAX_LINES = 4000
START_LIMIT_BURST = 5
START_LIMIT_INTERVAL = 10.0

FAULTS = (
    "unreachable",
    "slow",
    "host_key_rotated",
    "crash_on_start",
    "incoherent",
    "patched_file",
    "gpu_driver_error",
    "foreign_gpu_process",
)
PATCHED_FILE = "vllm/model_executor/layers/fused_moe/fused_moe.py"

# How long after `systemctl start` each kind of failure surfaces, as a share of the load time.
_FAIL_DELAY = {
    "exec": 0.0,
    "help": 0.05,
    "usage": 0.1,
    "cli": 0.1,
    "config": 0.1,
    "port": 0.15,
    "port_range": 0.15,
    "world_size": 0.15,
    "quantization": 0.18,
    "missing_model": 0.2,
    "missing_tokenizer": 0.2,
    "dp_world_size": 0.25,
    "free_memory": 0.3,
    "no_kv_cache": 0.8,
    "oom": 0.5,
    "crash": 0.7,
}
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
# The main process's exit status per failure (argparse exits 2, `--help` 0, tracebacks 1).
EXIT_STATUS = {"exec": 203, "help": 0, "usage": 2}
_STATUS_NAMES = {0: "SUCCESS", 1: "FAILURE", 2: "INVALIDARGUMENT", 203: "EXEC"}


def gpu_title(engine: EngineArgs, rank: int) -> str:
    """The process name nvidia-smi shows for a GPU worker: its title, set with setproctitle."""
    return f"VLLM::{worker_title(engine, rank)}"


def _fraction(*parts: object) -> float:
    """A stable number in [0, 1) per host and purpose, so restarts reproduce the same fleet."""
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def gpu_uuid(host: str, index: int) -> str:
    h = hashlib.sha256(f"{host}:gpu:{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def systemd_timestamp(wall: float | None) -> str:
    """`Mon 2026-11-30 09:12:41 UTC`: how systemctl shows a timestamp on a host set to UTC."""
    if wall is None:
        return ""
    return dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%a %Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class GpuSpec:
    index: int
    uuid: str
    idle_mib: int
    idle_power_w: float
    base_temp_c: int
    phase: float


@dataclass(frozen=True)
class UnitDefinition:
    """A unit file as systemd loaded it (at daemon-reload or first use), not as it is on disk."""

    text: str
    description: str = ""
    exec_start: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    restart: str = "no"
    restart_sec: float = 0.1
    bad_setting: str | None = None
    engine: EngineArgs | None = None

    @property
    def visible_gpus(self) -> tuple[int, ...]:
        for key, value in self.environment:
            if key == "CUDA_VISIBLE_DEVICES":
                try:
                    return tuple(int(v) for v in value.split(",") if v.strip() != "")
                except ValueError:
                    return ()
        return tuple(range(GPU_COUNT))


@dataclass
class Run:
    """One incarnation of a unit's main process, from spawn to exit."""

    pid: int
    started_mono: float
    started_wall: float
    engine: EngineArgs | None
    gpus: tuple[int, ...] = ()
    weights_mib: float = 0.0  # per GPU
    budget_mib: int = 0  # per GPU: gpu_memory_utilization * total
    visible: tuple[int, ...] = ()  # the GPUs CUDA_VISIBLE_DEVICES let it see
    free_mib: int | None = None  # free memory on its first GPU when that was too little
    ready_at: float | None = None  # monotonic; None when the run is doomed
    fail_at: float | None = None
    failure: str | None = None
    ready_logged: bool = False
    prompt_tokens: int = 0
    generation_tokens: int = 0
    finished: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0})

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
        for d in range(engine.data_parallel_size):
            pid = core_pid(engine, self.pid, d)
            procs[pid] = Process(pid, processes.comm(f"VLLM::{core_title(d)}"), unit)
        for rank in range(len(self.gpus)):
            pid = worker_pid(engine, self.pid, rank)
            procs.setdefault(pid, Process(pid, processes.comm(gpu_title(engine, rank)), unit))
        return sorted(procs.values(), key=lambda p: p.pid)

    def usage_mib(self, gpu: GpuSpec, now: float) -> int:
        """This process's memory on one GPU: context, then weights, then KV cache at ready."""
        if gpu.index not in self.gpus:
            return 0
        if self.ready(now):
            return max(0, min(GPU_MEMORY_MIB, self.budget_mib) - gpu.idle_mib)
        end = self.ready_at if self.ready_at is not None else self.fail_at
        if end is None:
            return 0
        f = min(1.0, max(0.0, (now - self.started_mono) / max(end - self.started_mono, 1e-6)))
        if self.failure in EARLY_FAILURES:
            return 0
        if self.failure == "free_memory":
            return int(CUDA_CONTEXT_MIB * f)
        if self.failure == "oom":
            room = max(0, GPU_MEMORY_MIB - gpu.idle_mib - CUDA_CONTEXT_MIB - 400)
            return int(CUDA_CONTEXT_MIB + room * f)
        if self.failure == "crash":
            f *= 0.85  # dies during warmup, after the weights and before the KV cache
        if f < 0.05:
            return int(CUDA_CONTEXT_MIB * f / 0.05)
        if f < 0.8:
            return int(CUDA_CONTEXT_MIB + self.weights_mib * (f - 0.05) / 0.75)
        return int(CUDA_CONTEXT_MIB + self.weights_mib + ACTIVATION_MIB)


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
        return f"{catalog.UNIT_DIR}/{self.name}" if self.definition is not None else ""


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


@dataclass(frozen=True)
class JournalEntry:
    wall: float
    unit: str | None
    ident: str
    pid: int
    message: str


def parse_unit_file(text: str) -> UnitDefinition:
    """Read the [Unit]/[Service] keys systemd would act on; other keys are ignored."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    section = ""
    values: dict[tuple[str, str], list[str]] = {}
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            continue
        if "=" in stripped:
            key, value = stripped.split("=", 1)
            values.setdefault((section, key.strip()), []).append(value.strip())

    def last(sec: str, key: str, default: str = "") -> str:
        found = values.get((sec, key))
        return found[-1] if found else default

    environment: list[tuple[str, str]] = []
    for entry in values.get(("Service", "Environment"), []):
        try:
            words = shlex.split(entry)
        except ValueError:
            words = []
        for word in words:
            if "=" in word:
                key, value = word.split("=", 1)
                environment.append((key, value))
    exec_lines = [v for v in values.get(("Service", "ExecStart"), []) if v]
    bad = None
    argv: tuple[str, ...] = ()
    if not exec_lines:
        bad = "Service has no ExecStart=, ExecStop=, or SuccessAction=. Refusing."
    else:
        command = exec_lines[-1].lstrip("-@:+!")
        try:
            argv = tuple(shlex.split(command))
        except ValueError:
            bad = f"Invalid command line, ignoring: {command}"
        if argv and not argv[0].startswith("/"):
            argv = (f"/usr/bin/{argv[0]}", *argv[1:])
    try:
        restart_sec = float(last("Service", "RestartSec", "0.1").rstrip("s") or 0.1)
    except ValueError:
        restart_sec = 0.1
    return UnitDefinition(
        text=text,
        description=last("Unit", "Description"),
        exec_start=argv,
        environment=tuple(environment),
        restart=last("Service", "Restart", "no"),
        restart_sec=restart_sec,
        bad_setting=bad,
        engine=parse_vllm_argv(argv) if argv else None,
    )


class Machine:
    """One simulated host. Every method reads the clock and settles due transitions first."""

    def __init__(
        self,
        name: str,
        *,
        load_seconds: float = DEFAULT_LOAD_SECONDS,
        slow_seconds: float = DEFAULT_SLOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        boot_unit: bool = True,
    ) -> None:
        self.name = name
        self.clock = clock
        self.wall = wall
        self.load_seconds = load_seconds
        self.slow_seconds = slow_seconds
        self.faults: set[str] = set()
        # A fault listed here hits only these model paths (a bad build, not a bad host).
        self.fault_models: dict[str, set[str]] = {}
        self.inflight_running = 0
        self.inflight_waiting = 0
        self.disk: dict[str, float] = dict(catalog.DEFAULT_DISK)
        self.unit_files: dict[str, str] = {}
        self.units: dict[str, Unit] = {}
        self.integrity_modified: list[str] = []
        self.integrity_missing: list[str] = []
        self.integrity_added: list[str] = []
        self.command_log: list[str] = []
        self.journal: collections.deque[JournalEntry] = collections.deque(maxlen=JOURNAL_MAX_LINES)
        self.rng = random.Random(f"simfleet:{name}")
        self.gpus = tuple(
            GpuSpec(
                index=i,
                uuid=gpu_uuid(name, i),
                idle_mib=int(_fraction(name, i, "idle-mib") * 6),
                idle_power_w=82.0 + 30.0 * _fraction(name, i, "power"),
                base_temp_c=31 + int(_fraction(name, i, "temp") * 11),
                phase=_fraction(name, i, "phase") * 2 * math.pi,
            )
            for i in range(GPU_COUNT)
        )
        self._next_pid = 2000 + self.rng.randint(0, 6000)
        # logind numbers sessions across the uptime; the fleet's own logins come after others'.
        self._next_session = 100 + int(_fraction(name, "sessions") * 900)
        self._user_managers: dict[int, tuple[int, int]] = {}  # uid -> systemd --user, (sd-pam)
        # The `foreign_gpu_process` fault: someone else's login and one process per GPU.
        self.foreign_login: Login | None = None
        self.foreign_procs: list[ForeignProcess] = []
        self.foreign_mib = processes.FOREIGN_MIB  # what each of them allocates
        if boot_unit:
            self._boot()

    # --- time ------------------------------------------------------------------------------

    def _wall_of(self, mono: float) -> float:
        return self.wall() - (self.clock() - mono)

    def tick(self) -> float:
        now = self.clock()
        for unit in list(self.units.values()):
            self._settle(unit, now)
        return now

    def _settle(self, unit: Unit, now: float) -> None:
        while True:
            run = unit.run
            if run is None:
                if unit.restart_at is not None and unit.restart_at <= now:
                    at = unit.restart_at
                    unit.restart_at = None
                    unit.n_restarts += 1
                    self._spawn(unit, at)
                    continue
                return
            if run.failure is not None and run.fail_at is not None and run.fail_at <= now:
                self._exit_failed(unit, run, run.fail_at)
                continue
            if run.ready_at is not None and not run.ready_logged and run.ready_at <= now:
                run.ready_logged = True
                self._log_lines(
                    unit, run, run.ready_at, journal.ready_lines(self, unit.name, run, run.ready_at)
                )
            return

    # --- journal ---------------------------------------------------------------------------

    def log(self, unit: str | None, message: str, *, wall: float, ident: str, pid: int) -> None:
        for line in message.split("\n"):
            self.journal.append(JournalEntry(wall, unit, ident, pid, line))

    def _log_lines(self, unit: Unit, run: Run, mono: float, lines: Iterable[str]) -> None:
        wall = self._wall_of(mono)
        for line in lines:
            self.log(unit.name, line, wall=wall, ident="vllm", pid=run.pid)

    def _log_systemd(self, unit: Unit, message: str, mono: float | None = None) -> None:
        wall = self.wall() if mono is None else self._wall_of(mono)
        self.log(unit.name, message, wall=wall, ident="systemd", pid=1)

    def journal_lines(self, units: Iterable[str] | None, count: int | None) -> list[JournalEntry]:
        self.tick()
        wanted = set(units) if units is not None else None
        entries = [e for e in self.journal if wanted is None or e.unit in wanted]
        if count is not None:
            entries = entries[-count:] if count > 0 else []
        return entries

    # --- units -----------------------------------------------------------------------------

    def unit_path(self, name: str) -> str:
        return f"{catalog.UNIT_DIR}/{name}"

    def lookup_unit(self, name: str) -> Unit | None:
        """The unit as systemd knows it, loading its file on first reference like systemd."""
        unit = self.units.get(name)
        if unit is not None and (unit.definition is not None or unit.run is not None):
            return unit
        text = self.unit_files.get(self.unit_path(name))
        if text is None:
            return None
        if unit is None:
            unit = self.units[name] = Unit(name=name, definition=parse_unit_file(text))
        else:
            unit.definition = parse_unit_file(text)
        return unit

    def needs_daemon_reload(self, unit: Unit) -> bool:
        on_disk = self.unit_files.get(self.unit_path(unit.name))
        loaded = unit.definition.text if unit.definition else None
        return on_disk != loaded

    def daemon_reload(self) -> None:
        self.tick()
        for name, unit in list(self.units.items()):
            text = self.unit_files.get(self.unit_path(name))
            unit.definition = parse_unit_file(text) if text is not None else None
            if unit.definition is None and unit.run is None:
                del self.units[name]
        for path in self.unit_files:
            if path.startswith(catalog.UNIT_DIR + "/") and path.endswith(".service"):
                self.lookup_unit(path[len(catalog.UNIT_DIR) + 1 :])

    def start(self, unit: Unit) -> None:
        now = self.tick()
        if unit.run is not None:
            return
        unit.restart_at = None
        unit.recent_starts = []
        self._spawn(unit, now)

    def stop(self, unit: Unit) -> None:
        now = self.tick()
        unit.restart_at = None
        run = unit.run
        if run is None:
            if unit.active_state != "failed":
                unit.active_state, unit.sub_state = "inactive", "dead"
            return
        desc = self._describe(unit)
        self._log_systemd(unit, f"Stopping {desc}...", now)
        if run.engine is not None and run.ready(now):
            self._log_lines(unit, run, now, journal.shutdown_lines(run, now))
        unit.run = None
        unit.active_state, unit.sub_state, unit.result = "inactive", "dead", "success"
        unit.active_exit_wall = self._wall_of(now)
        self._log_systemd(unit, f"{unit.name}: Deactivated successfully.", now)
        self._log_systemd(unit, f"Stopped {desc}.", now)

    def restart(self, unit: Unit) -> None:
        self.stop(unit)
        self.start(unit)

    def kill(self, unit: Unit, kind: str = "crash") -> None:
        """The main process dies now (a crash nobody asked for); Restart= decides what follows."""
        now = self.tick()
        run = unit.run
        if run is None:
            return
        run.failure, run.fail_at, run.ready_at = kind, now, None
        self._settle(unit, now)

    def _describe(self, unit: Unit) -> str:
        desc = unit.definition.description if unit.definition else ""
        return f"{unit.name} - {desc}" if desc else unit.name

    def _alloc_pid(self) -> int:
        self._next_pid += self.rng.randint(180, 2400)
        if self._next_pid > 4_000_000:
            self._next_pid = 3000 + self.rng.randint(0, 5000)
        return self._next_pid

    def _spawn(self, unit: Unit, at: float, *, booted: bool = False) -> None:
        definition = unit.definition
        if definition is None or definition.bad_setting:
            return
        unit.recent_starts = [t for t in unit.recent_starts if at - t < START_LIMIT_INTERVAL]
        unit.recent_starts.append(at)
        unit.last_exit = None
        pid = self._alloc_pid()
        wall = self._wall_of(at)
        run = Run(pid=pid, started_mono=at, started_wall=wall, engine=definition.engine)
        unit.run = run
        unit.active_state, unit.sub_state, unit.result = "active", "running", "success"
        unit.active_enter_wall = wall
        self._log_systemd(unit, f"Started {self._describe(unit)}.", at)
        binary = definition.exec_start[0] if definition.exec_start else ""
        if binary not in self.executables():
            self._doom(run, "exec", at)
            return
        engine = run.engine
        if engine is None:
            run.ready_at = at  # some other program: it just runs
            run.ready_logged = True
            return
        self._plan_engine(unit, run, engine, definition, at, booted=booted)
        if run.engine is not None:  # its EngineCores and workers took the PIDs that follow
            last = core_pid(run.engine, run.pid, run.engine.data_parallel_size - 1)
            self._next_pid = max(self._next_pid, last, run.pid + run.engine.gpus_needed)

    def executables(self) -> set[str]:
        return {catalog.VLLM_BINARY, "/usr/bin/sleep", "/usr/bin/python3", "/bin/sleep"}

    def _plan_engine(
        self,
        unit: Unit,
        run: Run,
        engine: EngineArgs,
        definition: UnitDefinition,
        at: float,
        *,
        booted: bool,
    ) -> None:
        """Decide at spawn time how this start ends, as vLLM would find out while loading.

        The checks come in vLLM's order: the command line, binding the API socket, the engine
        config (model, tokenizer, quantization, parallelism), then each GPU worker's free-memory
        check and the load itself.
        """
        if engine.reads_files:  # a --config file or chat template: read now, not at load
            engine = parse_vllm_argv(definition.exec_start, self.read_file) or engine
            run.engine = engine
        self._log_lines(unit, run, at, journal.startup_lines(self, unit.name, run, engine))
        kind = self._engine_failure(unit, run, engine, definition)
        if kind is None:
            kind = self._memory_failure(run, engine)
        if kind is None and self.fault_applies("crash_on_start", engine.model_path) and not booted:
            kind = "crash"
        if kind is not None:
            self._doom(run, kind, at)
            return
        run.ready_at = at + (BOOT_LOAD_SECONDS if booted else self.load_seconds)

    def _engine_failure(
        self, unit: Unit, run: Run, engine: EngineArgs, definition: UnitDefinition
    ) -> str | None:
        """Why the engine would stop before its workers touch a GPU (None: it gets that far)."""
        if engine.help_requested:
            return "help"
        if engine.usage_error is not None:
            return "usage"
        if engine.cli_failure is not None:
            return "cli"
        if not engine.headless and engine.uds is None and not 0 <= engine.port <= 65535:
            return "port_range"
        for other in self.units.values():
            if other is unit or other.run is None or other.run.engine is None:
                continue
            if other.run.failure is None and engine.binds_clash(other.run.engine):
                return "port"
        if not 0 < engine.gpu_memory_utilization <= 1:
            return "config"
        run.visible = tuple(g for g in definition.visible_gpus if 0 <= g < GPU_COUNT)
        tp, pp, dp = (
            engine.tensor_parallel_size,
            engine.pipeline_parallel_size,
            engine.data_parallel_size,
        )
        if min(tp, pp, dp) < 1 or tp * pp > len(run.visible):
            return "world_size"
        model_path = engine.model_path.rstrip("/")
        if model_path not in self.disk:
            return "missing_model"
        tokenizer = (engine.tokenizer or "").rstrip("/")
        if tokenizer and tokenizer != model_path and tokenizer not in self.disk:
            return "missing_tokenizer"
        model = catalog.MODELS_BY_PATH.get(model_path)
        if engine.quantization and model and engine.quantization != model.quantization:
            return "quantization"
        if engine.gpus_needed > len(run.visible):
            return "dp_world_size"
        return None

    def _memory_failure(self, run: Run, engine: EngineArgs) -> str | None:
        """Each worker's free-memory check at startup, then whether weights and KV cache fit.

        Every data-parallel replica holds a full copy of the weights, split over its
        tensor-parallel x pipeline-parallel GPUs.
        """
        weights_gib = self.disk[engine.model_path.rstrip("/")]
        run.gpus = run.visible[: engine.gpus_needed]
        run.budget_mib = int(engine.gpu_memory_utilization * GPU_MEMORY_MIB)
        run.weights_mib = weights_gib * 1024 / engine.world_size
        now = self.clock()
        for gpu in run.gpus:
            spec = self.gpus[gpu]
            used = self._runs_usage(spec, now, exclude=run) + self._foreign_usage(spec, now)
            free = GPU_MEMORY_MIB - spec.idle_mib - used
            if free < run.budget_mib:
                run.free_mib = free
                return "free_memory"
        if run.weights_mib > run.budget_mib:
            return "oom"
        if run.weights_mib + ACTIVATION_MIB + CUDA_CONTEXT_MIB > run.budget_mib:
            return "no_kv_cache"
        return None

    def _doom(self, run: Run, kind: str, at: float) -> None:
        run.failure = kind
        run.fail_at = at + self.load_seconds * _FAIL_DELAY.get(kind, 0.5)
        run.ready_at = None

    def _exit_failed(self, unit: Unit, run: Run, at: float) -> None:
        """The main process ended on its own: a failure, or `--help` exiting 0."""
        kind = run.failure or "crash"
        self._log_lines(unit, run, at, journal.failure_lines(self, unit.name, run, kind, at))
        unit.run = None
        unit.active_exit_wall = self._wall_of(at)
        status = EXIT_STATUS.get(kind, 1)
        unit.last_exit = (kind, status, run.engine)
        if kind == "exec":
            binary = run_binary(unit)
            self._log_systemd(
                unit,
                f"{unit.name}: Unable to locate executable '{binary}': No such file or directory",
                at,
            )
            self._log_systemd(
                unit,
                f"{unit.name}: Failed at step EXEC spawning {binary}: No such file or directory",
                at,
            )
        restart = unit.definition.restart if unit.definition else "no"
        if status == 0:
            self._log_systemd(unit, f"{unit.name}: Deactivated successfully.", at)
            unit.active_state, unit.sub_state, unit.result = "inactive", "dead", "success"
            restarts = restart == "always"
        else:
            name = _STATUS_NAMES.get(status, str(status))
            self._log_systemd(
                unit, f"{unit.name}: Main process exited, code=exited, status={status}/{name}", at
            )
            self._log_systemd(unit, f"{unit.name}: Failed with result 'exit-code'.", at)
            unit.active_state, unit.sub_state, unit.result = "failed", "failed", "exit-code"
            restarts = restart in ("always", "on-failure")
        if restarts:
            if len(unit.recent_starts) >= START_LIMIT_BURST:
                unit.active_state, unit.sub_state = "failed", "failed"
                unit.result = "start-limit-hit"
                self._log_systemd(unit, f"{unit.name}: Start request repeated too quickly.", at)
                self._log_systemd(unit, f"{unit.name}: Failed with result 'start-limit-hit'.", at)
                self._log_systemd(unit, f"Failed to start {self._describe(unit)}.", at)
                return
            delay = unit.definition.restart_sec if unit.definition else 0.1
            unit.active_state, unit.sub_state = "activating", "auto-restart"
            unit.restart_at = at + delay

    def _boot(self) -> None:
        """The state a fleet comes up in: the default unit has been serving for a while."""
        path = self.unit_path(catalog.DEFAULT_UNIT)
        self.unit_files[path] = catalog.unit_file_text()
        unit = self.lookup_unit(catalog.DEFAULT_UNIT)
        assert unit is not None
        uptime = 3600 * (2 + 460 * _fraction(self.name, "uptime")) + BOOT_LOAD_SECONDS
        self._spawn(unit, self.clock() - uptime, booted=True)
        if unit.run is not None and unit.run.ready_at is not None:
            unit.run.ready_logged = True
            self._log_lines(
                unit,
                unit.run,
                unit.run.ready_at,
                journal.ready_lines(self, unit.name, unit.run, unit.run.ready_at),
            )

    # --- GPUs ------------------------------------------------------------------------------

    def _busy_gpus(self, now: float) -> dict[int, float]:
        load = 0.0 if self.inflight_running <= 0 else min(1.0, 0.35 + self.inflight_running / 48)
        busy: dict[int, float] = {}
        if load:
            for unit in self.units.values():
                if unit.run is not None and unit.run.ready(now) and unit.run.gpus:
                    for g in unit.run.gpus:
                        busy[g] = load
        return busy

    def _runs_usage(self, gpu: GpuSpec, now: float, exclude: Run | None = None) -> int:
        return sum(
            u.run.usage_mib(gpu, now)
            for u in self.units.values()
            if u.run is not None and u.run is not exclude
        )

    def _foreign_mib(self, proc: ForeignProcess, now: float) -> int:
        """A foreign process's memory: what it allocated, never past what the GPU has left."""
        spec = self.gpus[proc.gpu]
        room = GPU_MEMORY_MIB - spec.idle_mib - self._runs_usage(spec, now)
        return max(0, min(proc.held_mib, room))

    def _foreign_usage(self, gpu: GpuSpec, now: float) -> int:
        return sum(self._foreign_mib(p, now) for p in self.foreign_procs if p.gpu == gpu.index)

    def gpu_readings(self) -> list[GpuReading]:
        now = self.tick()
        wall = self.wall()
        busy = self._busy_gpus(now)
        readings = []
        for gpu in self.gpus:
            used_by_apps = self._runs_usage(gpu, now) + self._foreign_usage(gpu, now)
            used = min(GPU_MEMORY_MIB, gpu.idle_mib + used_by_apps)
            wobble = math.sin(wall / 23.0 + gpu.phase) + 0.5 * math.sin(wall / 5.3 + 2 * gpu.phase)
            load = busy.get(gpu.index, 0.0)
            held = used_by_apps > 0
            if load:
                power = 330.0 + 240.0 * load + 9.0 * wobble
                util = int(min(100, max(1, 62 + 38 * load + 3 * wobble)))
                temp = gpu.base_temp_c + 18 + int(14 * load + wobble)
                pstate = "P0"
            else:
                power = gpu.idle_power_w + (6.0 if held else 0.0) + 1.2 * wobble
                util = 0
                temp = min(45, max(30, gpu.base_temp_c + (2 if held else 0) + round(wobble / 1.5)))
                pstate = "P1" if held else "P8"
            readings.append(
                GpuReading(
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
                )
            )
        return readings

    def compute_apps(self) -> list[AppReading]:
        """Every process holding GPU memory: engine workers, and foreign ones under the fault."""
        now = self.tick()
        apps = []
        for unit in self.units.values():
            run = unit.run
            if run is None or run.engine is None:
                continue
            for rank, g in enumerate(run.gpus):
                used = run.usage_mib(self.gpus[g], now)
                if used > 0:
                    apps.append(
                        AppReading(
                            pid=worker_pid(run.engine, run.pid, rank),
                            process_name=gpu_title(run.engine, rank),
                            used_memory_mib=used,
                            gpu_index=g,
                            gpu_uuid=self.gpus[g].uuid,
                            unit=unit.name,
                        )
                    )
        scope = self.foreign_login.scope if self.foreign_login else ""
        for proc in self.foreign_procs:
            used = self._foreign_mib(proc, now)
            if used > 0:
                apps.append(
                    AppReading(
                        pid=proc.pid,
                        process_name=proc.comm,
                        used_memory_mib=used,
                        gpu_index=proc.gpu,
                        gpu_uuid=self.gpus[proc.gpu].uuid,
                        unit=scope,
                    )
                )
        apps.sort(key=lambda a: (a.gpu_index, a.pid))
        return apps

    # --- processes -------------------------------------------------------------------------

    def _take_pids(self, count: int) -> list[int]:
        """Consecutive PIDs for processes started together (a login, a process and its children)."""
        first = self._next_pid + 1
        self._next_pid += count
        return list(range(first, first + count))

    def _user_manager(self, user: str) -> list[Process]:
        uid = processes.uid_of(user)
        if uid not in self._user_managers:
            a, b = self._take_pids(2)
            self._user_managers[uid] = (a, b)
        return processes.user_manager(uid, self._user_managers[uid])

    def new_login(self, user: str) -> Login:
        """An SSH login: logind gives it the next session number, sshd and the shell PIDs."""
        self._user_manager(user)
        priv, child, shell = self._take_pids(3)
        self._next_session += 1
        return Login(self._next_session, user, priv, child, shell)

    def processes(self, login: Login | None = None, own_pid: int | None = None) -> list[Process]:
        """What `ps -e` lists, by PID: the system, each unit's process tree, the logins.

        `login` is the session asking (with `own_pid`, the ps process itself).
        """
        self.tick()
        procs = {p.pid: p for p in processes.SYSTEM}
        for uid, pids in self._user_managers.items():
            procs.update((p.pid, p) for p in processes.user_manager(uid, pids))
        for unit in self.units.values():
            if unit.run is not None:
                procs.update((p.pid, p) for p in unit.run.processes(unit.name, run_binary(unit)))
        logins = [x for x in (self.foreign_login, login) if x is not None]
        for x in logins:
            procs.update((p.pid, p) for p in x.processes())
        if self.foreign_login is not None:
            scope = self.foreign_login.scope
            procs.update((p.pid, Process(p.pid, p.comm, scope)) for p in self.foreign_procs)
        if login is not None and own_pid is not None:
            procs[own_pid] = Process(own_pid, "ps", login.scope)
        return sorted(procs.values(), key=lambda p: p.pid)

    def take_pid(self) -> int:
        return self._take_pids(1)[0]

    def _start_foreign(self) -> None:
        """Someone logged in and started one python3 per GPU, each taking 4 GiB if it fits."""
        if self.foreign_procs:
            return  # already running: the same PIDs for as long as the fault stays on
        now = self.tick()
        self._user_manager(processes.FOREIGN_USER)
        priv, child, shell = self._take_pids(3)
        self.foreign_login = Login(
            processes.FOREIGN_SESSION, processes.FOREIGN_USER, priv, child, shell
        )
        pids = self._take_pids(GPU_COUNT)
        for pid, spec in zip(pids, self.gpus, strict=True):
            self.foreign_procs.append(ForeignProcess(pid, spec.index, self._room(spec, now)))

    def _room(self, spec: GpuSpec, now: float) -> int:
        """What a foreign process manages to allocate now: its wish, or what is left."""
        room = GPU_MEMORY_MIB - spec.idle_mib - self._runs_usage(spec, now)
        return max(0, min(self.foreign_mib, room))

    def set_foreign_memory(self, mib: int) -> None:
        """How much each foreign process holds (4096 MiB unless a test wants it tighter).

        Running ones are replaced by the same PIDs holding the new amount, as far as it fits.
        """
        self.foreign_mib = max(0, int(mib))
        now = self.tick()
        self.foreign_procs = [
            ForeignProcess(p.pid, p.gpu, self._room(self.gpus[p.gpu], now), p.comm)
            for p in self.foreign_procs
        ]

    def _stop_foreign(self) -> None:
        self.foreign_procs = []
        self.foreign_login = None
        self._user_managers.pop(processes.FOREIGN_UID, None)

    # --- inference servers -----------------------------------------------------------------

    def server_at(self, url_host: str, port: int) -> tuple[Unit, Run] | None:
        """The unit whose server answers `http://URL_HOST:PORT` on this host, once loaded."""
        now = self.tick()
        for unit in self.units.values():
            run = unit.run
            engine = run.engine if run else None
            if not (run and engine and engine.port == port and run.serving(now)):
                continue
            if engine.serves_http_at(url_host):
                return unit, run
        return None

    def server_on_port(self, port: int) -> tuple[Unit, Run] | None:
        """The server `curl http://127.0.0.1:PORT` reaches (None: connection refused)."""
        return self.server_at("127.0.0.1", port)

    def binds_address(self, address: str) -> bool:
        """Whether some server bound this exact address (so the host has it)."""
        return any(
            u.run is not None and u.run.engine is not None and u.run.engine.host == address
            for u in self.units.values()
        )

    def max_model_len(self, engine: EngineArgs) -> int:
        if engine.max_model_len:
            return engine.max_model_len
        model = catalog.MODELS_BY_PATH.get(engine.model_path.rstrip("/"))
        return model.max_model_len if model else 32768

    def kv_cache_usage(self) -> float:
        if self.inflight_running <= 0:
            return 0.0
        return round(min(1.0, 0.04 + 0.021 * self.inflight_running), 4)

    def set_inflight(self, running: int, waiting: int = 0) -> None:
        self.inflight_running = max(0, int(running))
        self.inflight_waiting = max(0, int(waiting))

    # --- out-of-band changes (what tests use to create drift) ------------------------------

    def write_file(self, path: str, content: str) -> None:
        self.unit_files[path] = content

    def remove_file(self, path: str) -> None:
        self.unit_files.pop(path, None)

    def read_file(self, path: str) -> str | None:
        """A regular file's contents as a program on the host would read them (None: missing)."""
        if path == "/etc/hostname":
            return self.name + "\n"
        if path == "/etc/os-release":
            return (
                'PRETTY_NAME="Ubuntu 24.04.3 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\n'
                'VERSION="24.04.3 LTS (Noble Numbat)"\nID=ubuntu\nID_LIKE=debian\n'
            )
        return self.unit_files.get(path)

    def set_fault(self, fault: str, on: bool = True, models: Iterable[str] | None = None) -> None:
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        if on:
            self.faults.add(fault)
            self.fault_models[fault] = set(models or ())
        else:
            self.faults.discard(fault)
            self.fault_models.pop(fault, None)
        if fault == "foreign_gpu_process":
            if on:
                self._start_foreign()
            else:
                self._stop_foreign()

    def fault_applies(self, fault: str, model_path: str | None) -> bool:
        if fault not in self.faults:
            return False
        only = self.fault_models.get(fault)
        return not only or model_path in only

    def integrity(self, dist: str) -> dict[str, Any] | None:
        """What the integrity script prints for `dist` on this host's engine install."""
        known = {"vllm": ("vllm", catalog.VLLM_VERSION, 1873), "torch": ("torch", "2.9.0", 15734)}
        norm = dist.lower().replace("_", "-").replace(".", "-")
        if norm not in known:
            return None
        name, version, checked = known[norm]
        modified = list(self.integrity_modified) if name == "vllm" else []
        if name == "vllm" and "patched_file" in self.faults and PATCHED_FILE not in modified:
            modified.append(PATCHED_FILE)
        missing = list(self.integrity_missing) if name == "vllm" else []
        added = list(self.integrity_added) if name == "vllm" else []
        return {
            "dist": name,
            "version": version,
            "checked": checked,
            "modified": sorted(modified),
            "missing": sorted(missing),
            "added": sorted(added),
        }

    # --- the whole truth, for tests --------------------------------------------------------

    def unit_snapshot(self, unit: Unit, now: float) -> dict[str, Any]:
        run = unit.run
        engine = run.engine if run else None
        if run is None:
            phase = "failed" if unit.active_state == "failed" else "stopped"
            if unit.restart_at is not None:
                phase = "auto-restart"
        elif engine is None:
            phase = "running"
        elif run.ready(now):
            phase = "ready"
        elif run.failure:
            phase = "failing"
        else:
            phase = "loading"
        definition = unit.definition
        return {
            "unit": unit.name,
            "load_state": unit.load_state,
            "active_state": unit.active_state,
            "sub_state": unit.sub_state,
            "main_pid": unit.main_pid,
            "active_enter_timestamp": systemd_timestamp(unit.active_enter_wall),
            "n_restarts": unit.n_restarts,
            "fragment_path": unit.fragment_path,
            "result": unit.result,
            "need_daemon_reload": self.needs_daemon_reload(unit),
            "phase": phase,
            "healthy": phase == "ready" and (engine is None or not engine.headless),
            # What the control plane's `curl http://127.0.0.1:PORT/...` reaches.
            "reachable_on_loopback": bool(
                phase == "ready"
                and engine
                and run
                and run.serving(now)
                and engine.serves_http_at("127.0.0.1")
            ),
            "failure": run.failure if run else None,
            "model_path": engine.model_path if engine else None,
            "served_name": engine.served_name if engine else None,
            "port": engine.port if engine else None,
            "served_names": list(engine.served_names) if engine else [],
            "host": engine.host if engine else None,
            "tensor_parallel_size": engine.tensor_parallel_size if engine else None,
            "pipeline_parallel_size": engine.pipeline_parallel_size if engine else None,
            "data_parallel_size": engine.data_parallel_size if engine else None,
            "max_model_len": self.max_model_len(engine) if engine else None,
            "gpu_memory_utilization": engine.gpu_memory_utilization if engine else None,
            "quantization": engine.quantization if engine else None,
            "trust_remote_code": engine.trust_remote_code if engine else None,
            "api_key_set": engine.api_key_set if engine else None,
            "headless": engine.headless if engine else None,
            # How the last run ended on its own (None: still running, or stopped by systemctl).
            "last_exit": (
                {"failure": unit.last_exit[0], "status": unit.last_exit[1]}
                if unit.last_exit and run is None
                else None
            ),
            "usage_error": (
                (engine or (unit.last_exit[2] if unit.last_exit and run is None else None))
                or _NO_ENGINE
            ).usage_error,
            "gpus": list(run.gpus) if run else [],
            "definition_sha256": (
                hashlib.sha256(definition.text.encode()).hexdigest() if definition else None
            ),
        }

    def snapshot(self) -> dict[str, Any]:
        now = self.tick()
        known = {n: u for n, u in self.units.items() if u.definition is not None or u.run}
        for path, text in self.unit_files.items():
            name = path[len(catalog.UNIT_DIR) + 1 :]
            if path.startswith(catalog.UNIT_DIR + "/") and name.endswith(".service"):
                # Described as systemd would load it, without loading it: looking must not
                # freeze a definition that a later daemon-reload or start should pick up.
                known.setdefault(name, Unit(name=name, definition=parse_unit_file(text)))
        units = {name: self.unit_snapshot(u, now) for name, u in sorted(known.items())}
        return {
            "name": self.name,
            "faults": sorted(self.faults),
            "load_seconds": self.load_seconds,
            "slow_seconds": self.slow_seconds,
            "inflight": {"running": self.inflight_running, "waiting": self.inflight_waiting},
            "gpus": [
                {k: v for k, v in r.__dict__.items() if k != "pstate"} for r in self.gpu_readings()
            ],
            "compute_apps": [a.__dict__.copy() for a in self.compute_apps()],
            "foreign_processes": [
                {
                    "pid": p.pid,
                    "process_name": p.comm,
                    "unit": self.foreign_login.scope if self.foreign_login else None,
                    "user": processes.FOREIGN_USER,
                    "gpu_index": p.gpu,
                    "gpu_uuid": self.gpus[p.gpu].uuid,
                    "used_memory_mib": self._foreign_mib(p, now),
                }
                for p in self.foreign_procs
            ],
            "units": units,
            "models": sorted(  # every name /v1/models lists, over all serving units
                {n for u in units.values() if u["healthy"] for n in u["served_names"]}
            ),
            "unit_files": {
                path: {"sha256": hashlib.sha256(text.encode()).hexdigest(), "content": text}
                for path, text in sorted(self.unit_files.items())
            },
            "disk": dict(sorted(self.disk.items())),
            "integrity": self.integrity("vllm"),
        }


_NO_ENGINE = EngineArgs(binary="", model_path="", served_name="")


def run_binary(unit: Unit) -> str:
    if unit.definition and unit.definition.exec_start:
        return unit.definition.exec_start[0]
    return ""
