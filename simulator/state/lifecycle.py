"""What systemd does with a unit's main process: spawn it, stop it, notice it die, restart it.

Nothing here runs on a timer: `settle` applies whatever was due by `now` (a load finishing, a
doomed start failing, Restart= bringing the unit back) whenever the machine's state is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import catalog, journal, real_engine, serving
from ..vllm_cli import core_pid, parse_vllm_argv, with_environment_key
from .engine_start import BOOT_LOAD_SECONDS, doom, plan_engine
from .environment import MissingEnvironmentFile, expand_argv, needs_expansion, unit_environment
from .gpus import stable_fraction
from .units import Run, Stopping, Unit, run_binary

if TYPE_CHECKING:
    from .machine import Machine

START_LIMIT_BURST = 5
START_LIMIT_INTERVAL = 10.0
# The programs a unit's ExecStart= may name; any other fails at systemd's EXEC step.
EXECUTABLES = frozenset({catalog.VLLM_BINARY, "/usr/bin/sleep", "/usr/bin/python3", "/bin/sleep"})
# The main process's exit status per failure (argparse exits 2, `--help` 0, tracebacks 1).
EXIT_STATUS = {"exec": 203, "help": 0, "usage": 2}
_STATUS_NAMES = {0: "SUCCESS", 1: "FAILURE", 2: "INVALIDARGUMENT", 203: "EXEC"}
# After its drain, vLLM aborts what is left, stops its EngineCore and GPU workers and frees
# their memory before the API server exits (host seconds).
ENGINE_TEARDOWN_SECONDS = 2.0


def settle(machine: Machine, unit: Unit, now: float) -> None:
    """Apply every transition of `unit` that was due by `now`, in order."""
    while True:
        if unit.stopping is not None and not _settle_stop(machine, unit, now):
            return
        run = unit.run
        if run is None:
            if unit.restart_at is not None and unit.restart_at <= now:
                at = unit.restart_at
                unit.restart_at = None
                unit.n_restarts += 1
                spawn(machine, unit, at)
                continue
            return
        real_engine.settle(machine, unit, run, now)  # a real engine's output, and its exit
        if run.failure is not None and run.fail_at is not None and run.fail_at <= now:
            _exit_failed(machine, unit, run, run.fail_at)
            continue
        if run.ready_at is not None and not run.ready_logged and run.ready_at <= now:
            run.ready_logged = True
            lines = journal.ready_lines(machine, run, run.ready_at)
            machine.log_vllm(unit, run, run.ready_at, lines)
        return


def describe(unit: Unit) -> str:
    desc = unit.definition.description if unit.definition else ""
    return f"{unit.name} - {desc}" if desc else unit.name


def start(machine: Machine, unit: Unit) -> None:
    now = machine.tick()
    if unit.stopping is not None:  # systemd queues the start behind the stop under way
        unit.stopping.then_start = True
        return
    if unit.run is not None:
        return
    _start_at(machine, unit, now)


def _start_at(machine: Machine, unit: Unit, at: float) -> None:
    unit.restart_at = None
    unit.recent_starts = []
    spawn(machine, unit, at)


def stop(machine: Machine, unit: Unit, *, then_start: bool = False) -> None:
    """SIGTERM to the main process. A vLLM with --shutdown-timeout drains first: the unit is
    deactivating until what is in flight finished or the timeout passed (or systemd's
    TimeoutStopSec= killed it), and a restart starts it again only then (`then_start`)."""
    now = machine.tick()
    unit.restart_at = None
    if unit.stopping is not None:  # already on its way down: a restart asked for meanwhile
        unit.stopping.then_start = unit.stopping.then_start or then_start
        return
    run = unit.run
    if run is None:
        if unit.active_state != "failed":
            unit.active_state, unit.sub_state = "inactive", "dead"
        if then_start:
            _start_at(machine, unit, now)
        return
    machine.log_systemd(unit, f"Stopping {describe(unit)}...", now)
    real_engine.stop(machine, unit, run)  # a real engine: stopped, and waited for
    engine = run.engine
    grace = engine.shutdown_timeout if engine is not None and run.ready(now) else 0
    if grace > 0 and unit.run is run:
        run.draining_since = now
        machine.load.stop_arrivals(now)  # the balancer's new requests get 503 now
        limit = unit.definition.timeout_stop_sec if unit.definition else 90.0
        unit.stopping = Stopping(now, now + grace, now + limit, then_start)
        unit.active_state, unit.sub_state = "deactivating", "stop-sigterm"
        settle(machine, unit, now)
        return
    _stopped(machine, unit, run, now)  # --shutdown-timeout 0: what is in flight is aborted
    if then_start:
        _start_at(machine, unit, now)


def restart(machine: Machine, unit: Unit) -> None:
    stop(machine, unit, then_start=True)


def _settle_stop(machine: Machine, unit: Unit, now: float) -> bool:
    """Finish a draining stop if it was due by `now`; False while it is still under way."""
    stopping, run = unit.stopping, unit.run
    assert stopping is not None
    if run is None:
        unit.stopping = None
        return True
    # The balancer's requests end when the load says; the engine's own (a curl on the host)
    # are seen ending when they do.
    if serving.running_requests(machine, run) > 0:
        stopping.busy_until = now
    busy = stopping.busy_until == now
    idle_at = max(machine.load.last_end(now), stopping.since, stopping.busy_until)
    drained_at = min(stopping.drain_until, idle_at)
    exits_at = drained_at + ENGINE_TEARDOWN_SECONDS
    if exits_at > stopping.kill_at and now >= stopping.kill_at:
        _killed(machine, unit, run, stopping.kill_at)
    elif exits_at <= now and (not busy or now >= stopping.drain_until):
        _stopped(machine, unit, run, exits_at)
    else:
        return False
    unit.stopping = None
    if stopping.then_start:
        _start_at(machine, unit, unit.stopping_ended_at)
    return True


def _stopped(machine: Machine, unit: Unit, run: Run, at: float) -> None:
    """The main process exited on SIGTERM, what was left in flight aborted."""
    if run.engine is not None and run.ready(at):
        machine.log_vllm(unit, run, at, journal.shutdown_lines(run))
    machine.load.abort()
    unit.run = None
    unit.stopping_ended_at = at
    unit.active_state, unit.sub_state, unit.result = "inactive", "dead", "success"
    unit.active_exit_wall = machine.wall_of(at)
    unit.exec_main_code, unit.exec_main_status = 1, 0  # vLLM exits 0 on SIGTERM
    machine.log_systemd(unit, f"{unit.name}: Deactivated successfully.", at)
    machine.log_systemd(unit, f"Stopped {describe(unit)}.", at)


def _killed(machine: Machine, unit: Unit, run: Run, at: float) -> None:
    """TimeoutStopSec= passed before the main process exited: systemd killed it."""
    for message in (
        f"{unit.name}: State 'stop-sigterm' timed out. Killing.",
        f"{unit.name}: Killing process {run.pid} (vllm) with signal SIGKILL.",
        f"{unit.name}: Main process exited, code=killed, status=9/KILL",
        f"{unit.name}: Failed with result 'timeout'.",
    ):
        machine.log_systemd(unit, message, at)
    machine.load.abort()
    unit.run = None
    unit.stopping_ended_at = at
    unit.active_state, unit.sub_state, unit.result = "failed", "failed", "timeout"
    unit.active_exit_wall = machine.wall_of(at)
    unit.exec_main_code, unit.exec_main_status = 2, 9
    machine.log_systemd(unit, f"Stopped {describe(unit)}.", at)


def kill(machine: Machine, unit: Unit, kind: str) -> None:
    """The main process dies now (a crash nobody asked for); Restart= decides what follows."""
    now = machine.tick()
    run = unit.run
    if run is None:
        return
    unit.stopping = None  # it died draining: what systemd does next is Restart='s business
    run.failure, run.fail_at, run.ready_at = kind, now, None
    settle(machine, unit, now)


def _alloc_pid(machine: Machine) -> int:
    machine.next_pid += machine.rng.randint(180, 2400)
    if machine.next_pid > 4_000_000:
        machine.next_pid = 3000 + machine.rng.randint(0, 5000)
    return machine.next_pid


def spawn(machine: Machine, unit: Unit, at: float, *, booted: bool = False) -> None:
    definition = unit.definition
    if definition is None or definition.bad_setting:
        return
    unit.recent_starts = [t for t in unit.recent_starts if at - t < START_LIMIT_INTERVAL]
    unit.recent_starts.append(at)
    unit.last_exit = None
    try:  # EnvironmentFile= is read now, by systemd, before it forks
        environment = unit_environment(
            definition.environment, definition.environment_files, machine.read_file
        )
    except MissingEnvironmentFile:
        _spawn_failed(machine, unit, at)
        return
    argv = definition.exec_start
    engine = definition.engine
    if needs_expansion(argv):
        argv = expand_argv(argv, environment)
        engine = parse_vllm_argv(argv)
    if engine is not None and not engine.api_key_sha256 and environment.get("VLLM_API_KEY"):
        engine = with_environment_key(engine, environment["VLLM_API_KEY"])
    pid = _alloc_pid(machine)
    wall = machine.wall_of(at)
    run = Run(pid, at, wall, engine, argv=argv, environment=environment)
    machine.load.server_started()
    unit.run = run
    unit.active_state, unit.sub_state, unit.result = "active", "running", "success"
    unit.active_enter_wall = wall
    unit.exec_main_pid, unit.exec_main_start_wall = pid, wall
    unit.exec_main_code = unit.exec_main_status = 0
    machine.log_systemd(unit, f"Started {describe(unit)}.", at)
    if (argv[0] if argv else "") not in EXECUTABLES:
        doom(machine, run, "exec", at)
        return
    if engine is None:
        run.ready_at = at  # some other program: it just runs
        run.ready_logged = True
        return
    if real_engine.spawn(machine, unit, run):  # a host flagged to run the real vLLM
        return
    plan_engine(machine, unit, run, engine, definition, at, booted=booted)
    if run.engine is not None:  # its EngineCores and workers took the PIDs that follow
        last = core_pid(run.engine, run.pid, run.engine.data_parallel_size - 1)
        machine.next_pid = max(machine.next_pid, last, run.pid + run.engine.gpus_needed)


def _spawn_failed(machine: Machine, unit: Unit, at: float) -> None:
    """A mandatory environment file is missing: no process, the unit fails with 'resources'
    (and Restart=on-failure tries again, until the start limit)."""
    for message in (
        f"{unit.name}: Failed to load environment files: No such file or directory",
        f"{unit.name}: Failed to spawn 'start' task: No such file or directory",
        f"{unit.name}: Failed with result 'resources'.",
    ):
        machine.log_systemd(unit, message, at)
    machine.log_systemd(unit, f"Failed to start {describe(unit)}.", at)
    unit.active_state, unit.sub_state, unit.result = "failed", "failed", "resources"
    unit.active_exit_wall = machine.wall_of(at)
    if unit.definition is not None and unit.definition.restart in ("always", "on-failure"):
        _schedule_restart(machine, unit, at)


def _exit_failed(machine: Machine, unit: Unit, run: Run, at: float) -> None:
    """The main process ended on its own: a failure, or `--help` exiting 0."""
    kind = run.failure or "crash"
    machine.log_vllm(unit, run, at, journal.failure_lines(machine, run, kind, at))
    unit.run = None
    unit.active_exit_wall = machine.wall_of(at)
    status = EXIT_STATUS.get(kind, 1)
    unit.last_exit = (kind, status, run.engine)
    unit.exec_main_code, unit.exec_main_status = 1, status
    if kind == "exec":
        binary = run_binary(unit)
        machine.log_systemd(
            unit,
            f"{unit.name}: Unable to locate executable '{binary}': No such file or directory",
            at,
        )
        machine.log_systemd(
            unit,
            f"{unit.name}: Failed at step EXEC spawning {binary}: No such file or directory",
            at,
        )
    restart = unit.definition.restart if unit.definition else "no"
    if status == 0:
        machine.log_systemd(unit, f"{unit.name}: Deactivated successfully.", at)
        unit.active_state, unit.sub_state, unit.result = "inactive", "dead", "success"
        restarts = restart == "always"
    else:
        name = _STATUS_NAMES.get(status, str(status))
        machine.log_systemd(
            unit, f"{unit.name}: Main process exited, code=exited, status={status}/{name}", at
        )
        machine.log_systemd(unit, f"{unit.name}: Failed with result 'exit-code'.", at)
        unit.active_state, unit.sub_state, unit.result = "failed", "failed", "exit-code"
        restarts = restart in ("always", "on-failure")
    if restarts:
        _schedule_restart(machine, unit, at)


def _schedule_restart(machine: Machine, unit: Unit, at: float) -> None:
    """Restart= after RestartSec=, unless the unit started too often (StartLimitBurst=)."""
    if len(unit.recent_starts) >= START_LIMIT_BURST:
        unit.active_state, unit.sub_state = "failed", "failed"
        unit.result = "start-limit-hit"
        machine.log_systemd(unit, f"{unit.name}: Start request repeated too quickly.", at)
        machine.log_systemd(unit, f"{unit.name}: Failed with result 'start-limit-hit'.", at)
        machine.log_systemd(unit, f"Failed to start {describe(unit)}.", at)
        return
    delay = unit.definition.restart_sec if unit.definition else 0.1
    unit.active_state, unit.sub_state = "activating", "auto-restart"
    unit.restart_at = at + delay


def boot(machine: Machine, style: str = "controlplane") -> None:
    """The state a fleet comes up in: the default unit has been serving for a while.

    `style` is the unit's shape: "controlplane" (what the control plane writes) or "envfile"
    (written by hand: the model from an EnvironmentFile= through ${VAR}, see catalog).
    """
    path = machine.unit_path(catalog.DEFAULT_UNIT)
    if style == "envfile":
        machine.unit_files[catalog.ENV_FILE] = catalog.envfile_text()
        machine.unit_files[path] = catalog.envfile_unit_text()
    elif style == "controlplane":
        machine.unit_files[path] = catalog.unit_file_text()
    else:
        raise ValueError(f"unknown unit style {style!r}; known: {', '.join(catalog.UNIT_STYLES)}")
    unit = machine.lookup_unit(catalog.DEFAULT_UNIT)
    assert unit is not None
    uptime = 3600 * (2 + 460 * stable_fraction(machine.name, "uptime")) + BOOT_LOAD_SECONDS
    spawn(machine, unit, machine.clock() - uptime, booted=True)
    run = unit.run
    if run is not None and run.ready_at is not None:
        run.ready_logged = True
        lines = journal.ready_lines(machine, run, run.ready_at)
        machine.log_vllm(unit, run, run.ready_at, lines)
