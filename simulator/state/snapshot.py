"""The whole truth about a host as plain data, for tests to compare with what the product saw."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from .. import processes
from ..vllm_cli import EngineArgs
from . import cgroup
from .gpus import foreign_mib
from .units import Unit, systemd_timestamp

if TYPE_CHECKING:
    from .machine import Machine

_NO_ENGINE = EngineArgs(binary="", model_path="", served_name="")


def snapshot(machine: Machine) -> dict[str, Any]:
    now = machine.tick()
    known = {n: u for n, u in machine.units.items() if u.definition is not None or u.run}
    for name in machine.unit_names_on_disk():
        # Described as systemd would load it, without loading it: looking must not freeze a
        # definition that a later daemon-reload or start should pick up.
        if name not in known:
            known[name] = Unit(name=name, definition=machine.load_definition(name))
    units = {name: unit_snapshot(machine, u, now) for name, u in sorted(known.items())}
    return {
        "name": machine.name,
        "faults": sorted(machine.faults),
        "load_seconds": machine.load_seconds,
        "slow_seconds": machine.slow_seconds,
        "inflight": {"running": machine.inflight_running, "waiting": machine.inflight_waiting},
        "in_rotation": machine.load.in_rotation,
        "hardware": machine.hardware.describe(),
        "gpus": [
            {k: v for k, v in r.__dict__.items() if k not in ("pstate", "hardware")}
            for r in machine.gpu_readings()
        ],
        "compute_apps": [a.__dict__.copy() for a in machine.compute_apps()],
        "foreign_processes": [
            {
                "pid": p.pid,
                "process_name": p.comm,
                "unit": machine.foreign_login.scope if machine.foreign_login else None,
                "user": processes.FOREIGN_USER,
                "gpu_index": p.gpu,
                "gpu_uuid": machine.gpus[p.gpu].uuid,
                "used_memory_mib": foreign_mib(machine, p, now),
            }
            for p in machine.foreign_procs
        ],
        "units": units,
        "kernel_log": [e.message for e in machine.kernel_log],
        "models": sorted(  # every name /v1/models lists, over all serving units
            {n for u in units.values() if u["healthy"] for n in u["served_names"]}
        ),
        "unit_files": {
            path: {"sha256": hashlib.sha256(text.encode()).hexdigest(), "content": text}
            for path, text in sorted(machine.unit_files.items())
        },
        "disk": dict(sorted(machine.disk.items())),
        "hf_cache": dict(sorted(machine.hf_cache.items())),
        "integrity": machine.integrity("vllm"),
    }


def unit_snapshot(machine: Machine, unit: Unit, now: float) -> dict[str, Any]:
    """One unit: systemd's view, the engine's settings, and how its last run ended."""
    run = unit.run
    engine = run.engine if run else None
    return {
        **_systemd_fields(machine, unit, now),
        **_engine_fields(machine, engine),
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
            hashlib.sha256(unit.definition.text.encode()).hexdigest() if unit.definition else None
        ),
    }


def _phase(unit: Unit, now: float) -> str:
    """Where the unit is: stopped, failed, auto-restart, running, loading, failing or ready."""
    run = unit.run
    if run is None:
        if unit.restart_at is not None:
            return "auto-restart"
        return "failed" if unit.active_state == "failed" else "stopped"
    if run.engine is None:
        return "running"
    if run.ready(now):
        return "ready"
    return "failing" if run.failure else "loading"


def _systemd_fields(machine: Machine, unit: Unit, now: float) -> dict[str, Any]:
    run = unit.run
    engine = run.engine if run else None
    phase = _phase(unit, now)
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
        "need_daemon_reload": machine.needs_daemon_reload(unit),
        **_accounting_fields(machine, unit, now),
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
    }


def _accounting_fields(machine: Machine, unit: Unit, now: float) -> dict[str, Any]:
    """The last main process, the cgroup's counters, and what the unit was started with."""
    run, definition = unit.run, unit.definition
    memory, peak = cgroup.memory_bytes(run, now, machine.inflight_running) if run else (None, None)
    return {
        "exec_main_pid": unit.exec_main_pid,
        "exec_main_code": unit.exec_main_code,
        "exec_main_status": unit.exec_main_status,
        "exec_main_start_timestamp": systemd_timestamp(unit.exec_main_start_wall),
        "memory_current_bytes": memory,
        "memory_peak_bytes": peak,
        "cpu_usage_nsec": cgroup.cpu_nsec(run, now) if run else None,
        "tasks_current": cgroup.tasks(run) if run else None,
        "drop_in_paths": [p for p, _ in definition.dropins] if definition else [],
        "environment_files": [list(f) for f in definition.environment_files] if definition else [],
        "argv": _shown_argv(run.argv) if run else [],
        # Names only: the values may be secrets, and tests look for those in other places.
        "environment_keys": sorted(run.environment) if run else [],
    }


def _shown_argv(argv: tuple[str, ...]) -> list[str]:
    """The command line as started, with the values of secret flags (--api-key, --hf-token,
    and their abbreviations or `_` spellings) hidden, as vLLM hides them in its own log."""
    shown: list[str] = []
    hide_next = False
    for word in argv:
        flag, eq, _value = word.partition("=")
        secret = flag.replace("_", "-").startswith(("--api-k", "--hf-t"))
        if hide_next:
            shown.append("<redacted>")
        elif secret and eq:
            shown.append(f"{flag}=<redacted>")
        else:
            shown.append(word)
        hide_next = secret and not eq
    return shown


def _engine_fields(machine: Machine, engine: EngineArgs | None) -> dict[str, Any]:
    return {
        "model_path": engine.model_path if engine else None,
        "served_name": engine.served_name if engine else None,
        "port": engine.port if engine else None,
        "served_names": list(engine.served_names) if engine else [],
        "host": engine.host if engine else None,
        "tensor_parallel_size": engine.tensor_parallel_size if engine else None,
        "pipeline_parallel_size": engine.pipeline_parallel_size if engine else None,
        "data_parallel_size": engine.data_parallel_size if engine else None,
        "max_model_len": machine.max_model_len(engine) if engine else None,
        "gpu_memory_utilization": engine.gpu_memory_utilization if engine else None,
        "quantization": engine.quantization if engine else None,
        "trust_remote_code": engine.trust_remote_code if engine else None,
        "api_key_set": engine.api_key_set if engine else None,
        "headless": engine.headless if engine else None,
    }
