"""One simulated host: the state every tool reads and changes, and the calls that change it.

The machine holds the data; what systemd, the GPUs and the process table do with it lives in
the modules next to this one, called from here so that every read settles the clock first.
"""

from __future__ import annotations

import collections
import random
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from .. import catalog, engine_files, processes
from ..engine_files import PATCHED_FILE as PATCHED_FILE  # where tests look for it
from ..processes import Login, Process
from ..simclock import scaled
from ..vllm_cli import EngineArgs
from . import gpu_faults, gpus, kernel_log, lifecycle, process_table
from .gpus import AppReading, ForeignProcess, GpuReading, stable_fraction
from .hardware import DEFAULT_HARDWARE, HardwareProfile
from .load import Load
from .snapshot import snapshot
from .unit_file import parse_unit_file
from .units import JournalEntry, Run, Unit, UnitDefinition

DEFAULT_LOAD_SECONDS = 3.0
DEFAULT_SLOW_SECONDS = 5.0
JOURNAL_MAX_LINES = 4000
COMMAND_LOG_MAX = 10_000  # commands remembered per host

FAULTS = (
    "unreachable",
    "slow",
    "host_key_rotated",
    "crash_on_start",
    "incoherent",
    "patched_file",
    "gpu_driver_error",
    "foreign_gpu_process",
    "five_token_corruption",
    "pip_index_unreachable",
    *gpu_faults.GPU_FAULTS,  # a GPU's or its engine's: see gpu_faults
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
        unit_style: str = "controlplane",
        time_scale: float = 1.0,
        hardware: HardwareProfile = DEFAULT_HARDWARE,
    ) -> None:
        self.name = name
        self.hardware = hardware  # what its GPUs are (see hardware.PROFILES)
        # Real seconds per simulated second (0.01: a hundred times faster; see simclock).
        self.time_scale = time_scale
        self.clock = scaled(clock, time_scale)
        self.wall = wall
        self.load_seconds = load_seconds
        self.slow_seconds = slow_seconds
        self.faults: set[str] = set()
        self.fault_since: dict[str, float] = {}  # GPU faults: when each went on (monotonic)
        # A fault listed here hits only these model paths (a bad build, not a bad host).
        self.fault_models: dict[str, set[str]] = {}
        # The load balancer's requests in flight, and whether it sends this host any (load).
        self.load = Load()
        self.disk: dict[str, float] = dict(catalog.DEFAULT_DISK)
        self.hf_cache: dict[str, str] = dict(catalog.DEFAULT_HF_CACHE)  # repo id -> snapshot
        self.unit_files: dict[str, str] = {}
        self.units: dict[str, Unit] = {}
        self.integrity_modified: list[str] = []
        self.integrity_missing: list[str] = []
        self.integrity_added: list[str] = []
        # what tests assert on; bounded so a fleet simulated for days does not grow without end
        self.command_log: collections.deque[str] = collections.deque(maxlen=COMMAND_LOG_MAX)
        self.journal: collections.deque[JournalEntry] = collections.deque(maxlen=JOURNAL_MAX_LINES)
        self.kernel_log: collections.deque[JournalEntry] = collections.deque(
            maxlen=kernel_log.KERNEL_LOG_MAX_LINES
        )
        self.rng = random.Random(f"simfleet:{name}")
        self.gpus = gpus.gpu_specs(name, hardware)
        self.next_pid = 2000 + self.rng.randint(0, 6000)  # the last PID handed out
        # logind numbers sessions across the uptime; the fleet's own logins come after others'.
        self.next_session = 100 + int(stable_fraction(name, "sessions") * 900)
        self.user_managers: dict[int, tuple[int, int]] = {}  # uid -> systemd --user, (sd-pam)
        # The `foreign_gpu_process` fault: someone else's login and one process per GPU.
        self.foreign_login: Login | None = None
        self.foreign_procs: list[ForeignProcess] = []
        self.foreign_mib = processes.FOREIGN_MIB  # what each of them allocates
        if boot_unit:
            lifecycle.boot(self, unit_style)

    # --- time ------------------------------------------------------------------------------

    def wall_of(self, mono: float) -> float:
        """The wall-clock time of a monotonic instant."""
        return self.wall() - (self.clock() - mono)

    def tick(self) -> float:
        now = self.clock()
        for unit in list(self.units.values()):
            lifecycle.settle(self, unit, now)
        return now

    # --- journal ---------------------------------------------------------------------------

    def log(self, unit: str | None, message: str, *, wall: float, ident: str, pid: int) -> None:
        for line in message.split("\n"):
            self.journal.append(JournalEntry(wall, unit, ident, pid, line))

    def log_vllm(self, unit: Unit, run: Run, mono: float, lines: Iterable[str]) -> None:
        """What the unit's vLLM process printed at `mono`."""
        wall = self.wall_of(mono)
        for line in lines:
            self.log(unit.name, line, wall=wall, ident="vllm", pid=run.pid)

    def log_systemd(self, unit: Unit, message: str, mono: float | None = None) -> None:
        """What systemd logged about the unit, now or at `mono`."""
        wall = self.wall() if mono is None else self.wall_of(mono)
        self.log(unit.name, message, wall=wall, ident="systemd", pid=1)

    def journal_lines(
        self,
        units: Iterable[str] | None,
        count: int | None,
        *,
        kernel: bool = False,
        grep: re.Pattern[str] | None = None,
    ) -> list[JournalEntry]:
        """The units' entries (None: every unit's and the kernel's), or with `kernel` the
        kernel's only; those matching `grep`, the newest `count` of them."""
        self.tick()
        entries = kernel_log.select(self, units, kernel=kernel, grep=grep)
        if count is not None:
            entries = entries[-count:] if count > 0 else []
        return entries

    # --- units -----------------------------------------------------------------------------

    def unit_path(self, name: str) -> str:
        return f"{catalog.UNIT_DIR}/{name}"

    def dropin_paths(self, name: str) -> list[str]:
        """`<unit>.d/*.conf` under the unit directory, in the order systemd applies them."""
        prefix = f"{catalog.UNIT_DIR}/{name}.d/"
        return sorted(
            (p for p in self.unit_files if p.startswith(prefix) and p.endswith(".conf")),
            key=lambda p: p.rsplit("/", 1)[1],
        )

    def _on_disk(self, name: str) -> tuple[str, tuple[tuple[str, str], ...]] | None:
        """The unit's fragment text and its drop-ins as they are on disk (None: no fragment)."""
        text = self.unit_files.get(self.unit_path(name))
        if text is None:
            return None
        return text, tuple((p, self.unit_files[p]) for p in self.dropin_paths(name))

    def load_definition(self, name: str) -> UnitDefinition | None:
        """The unit as systemd would load it from disk now (fragment, then drop-ins)."""
        found = self._on_disk(name)
        if found is None:
            return None
        return parse_unit_file(found[0], found[1], self.unit_path(name))

    def lookup_unit(self, name: str) -> Unit | None:
        """The unit as systemd knows it, loading its file on first reference like systemd."""
        unit = self.units.get(name)
        if unit is not None and (unit.definition is not None or unit.run is not None):
            return unit
        definition = self.load_definition(name)
        if definition is None:
            return None
        if unit is None:
            unit = self.units[name] = Unit(name=name, definition=definition)
        else:
            unit.definition = definition
        return unit

    def needs_daemon_reload(self, unit: Unit) -> bool:
        """Whether the fragment or a drop-in changed, appeared or went since it was loaded."""
        on_disk = self._on_disk(unit.name)
        loaded = (unit.definition.text, unit.definition.dropins) if unit.definition else None
        return on_disk != loaded

    def daemon_reload(self) -> None:
        self.tick()
        for name, unit in list(self.units.items()):
            unit.definition = self.load_definition(name)
            if unit.definition is None and unit.run is None:
                del self.units[name]
        for name in self.unit_names_on_disk():
            self.lookup_unit(name)

    def unit_names_on_disk(self) -> list[str]:
        """Service units with a fragment directly in the unit directory."""
        prefix = catalog.UNIT_DIR + "/"
        names = [p[len(prefix) :] for p in self.unit_files if p.startswith(prefix)]
        return [n for n in names if n.endswith(".service") and "/" not in n]

    def start(self, unit: Unit) -> None:
        lifecycle.start(self, unit)

    def stop(self, unit: Unit) -> None:
        lifecycle.stop(self, unit)

    def restart(self, unit: Unit) -> None:
        lifecycle.restart(self, unit)

    def kill(self, unit: Unit, kind: str = "crash") -> None:
        """The main process dies now (a crash nobody asked for); Restart= decides what follows."""
        lifecycle.kill(self, unit, kind)

    # --- GPUs and processes ----------------------------------------------------------------

    def gpu_readings(self) -> list[GpuReading]:
        now = self.tick()
        return gpu_faults.apply(self, gpus.gpu_readings(self, now, self.wall()), now)

    def gpu_history(
        self, *, start_wall: float, end_wall: float, every_seconds: float
    ) -> list[tuple[float, list[GpuReading]]]:
        """A typical day's readings of every GPU over a span of wall-clock time (for a demo's
        charts; gpus.gpu_history says how)."""
        return gpus.gpu_history(
            self, start_wall=start_wall, end_wall=end_wall, every_seconds=every_seconds
        )

    def compute_apps(self) -> list[AppReading]:
        """Every process holding GPU memory: engine workers, and foreign ones under the fault."""
        return gpus.compute_apps(self, self.tick())

    def new_login(self, user: str) -> Login:
        """An SSH login: logind gives it the next session number, sshd and the shell PIDs."""
        return process_table.new_login(self, user)

    def processes(self, login: Login | None = None, own_pid: int | None = None) -> list[Process]:
        """What `ps -e` lists, by PID (`login` asking, with `own_pid` the ps process itself)."""
        self.tick()
        return process_table.listing(self, login, own_pid)

    def take_pid(self) -> int:
        return process_table.take_pids(self, 1)[0]

    def set_foreign_memory(self, mib: int) -> None:
        """How much each foreign process holds (4096 MiB unless a test wants it tighter)."""
        process_table.set_foreign_memory(self, mib)

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

    def binds_address(self, address: str) -> bool:
        """Whether some server bound this exact address (so the host has it)."""
        return any(
            u.run is not None and u.run.engine is not None and u.run.engine.host == address
            for u in self.units.values()
        )

    def model_dir(self, model: str) -> str | None:
        """Where the weights of `model` are: a local path as given, or a Hugging Face repo id
        through the host's cache (None: not cached, and the host has no network to fetch)."""
        if model.startswith(("/", ".")):
            return model.rstrip("/")
        return self.hf_cache.get(model)

    def max_model_len(self, engine: EngineArgs) -> int:
        if engine.max_model_len:
            return engine.max_model_len
        model = catalog.MODELS_BY_PATH.get(self.model_dir(engine.model_path) or "")
        return model.max_model_len if model else 32768

    @property
    def inflight_running(self) -> int:
        """The balancer's requests the engine is generating for now."""
        return self.load.counts(self.clock())[0]

    @property
    def inflight_waiting(self) -> int:
        return self.load.counts(self.clock())[1]

    def kv_cache_usage(self) -> float:
        running = self.inflight_running
        if running <= 0:
            return 0.0
        return round(min(1.0, 0.04 + 0.021 * running), 4)

    def set_inflight(self, running: int, waiting: int = 0) -> None:
        self.tick()
        self.load.set(running, waiting, self.clock())

    # --- the load balancer's rotation (the lb-drain tool and its HTTP agent) ----------------

    def rotation_out(self) -> None:
        """Out of the balancer's rotation: no new request arrives, those in flight finish."""
        now = self.tick()
        self.load.rotation_out(now)

    def rotation_in(self) -> None:
        self.tick()
        self.load.rotation_in()

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
        was_on = fault in self.faults
        if on:
            self.faults.add(fault)
            self.fault_models[fault] = set(models or ())
        else:
            self.faults.discard(fault)
            self.fault_models.pop(fault, None)
        if fault == "foreign_gpu_process":
            if on:
                process_table.start_foreign(self)
            else:
                process_table.stop_foreign(self)
        gpu_faults.switched(self, fault, was_on, on)

    def fault_applies(self, fault: str, model_path: str | None) -> bool:
        if fault not in self.faults:
            return False
        only = self.fault_models.get(fault)
        if not only:
            return True
        return model_path in only or (model_path is not None and self.model_dir(model_path) in only)

    def integrity(self, dist: str) -> dict[str, Any] | None:
        """What the integrity script prints for `dist` on this host's engine install."""
        return engine_files.integrity_report(self, dist)

    # --- the whole truth, for tests --------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return snapshot(self)
