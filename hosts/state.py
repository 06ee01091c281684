"""The parsed state of a host, as the parsers produce it and snapshots store it.

Everything here is plain data: dataclasses in, JSON-ready dicts out, no I/O.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class GpuState:
    index: int
    uuid: str | None = None
    name: str | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    utilization_pct: int | None = None
    temperature_c: int | None = None


@dataclass
class ComputeApp:
    pid: int
    process_name: str
    used_memory_mib: int | None = None


@dataclass
class UnitState:
    """`systemctl show` of one unit. A unit that does not exist has load_state 'not-found'."""

    unit: str
    load_state: str | None = None
    active_state: str | None = None
    sub_state: str | None = None
    main_pid: int | None = None
    active_enter_timestamp: str | None = None
    n_restarts: int | None = None
    fragment_path: str | None = None


@dataclass
class ServerState:
    """What the inference server behind a unit says about itself over HTTP."""

    healthy: bool = False
    health_http_status: int | None = None
    models: list[str] = field(default_factory=list)  # served ids from /v1/models
    model_roots: list[str] = field(default_factory=list)  # "root" of each (path or HF id)
    max_model_len: int | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1


@dataclass
class IntegrityReport:
    dist: str | None = None
    version: str | None = None
    checked: int = 0
    modified: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def clean(self) -> bool:
        return self.error is None and not (self.modified or self.missing or self.added)


@dataclass
class Problem:
    """A section that could not be read cleanly. It makes the snapshot `partial`."""

    section: str
    message: str


@dataclass
class DeploymentState:
    unit: UnitState
    unit_file_sha256: str | None = None
    server: ServerState = field(default_factory=ServerState)
    integrity: IntegrityReport | None = None


@dataclass
class HostState:
    gpus: list[GpuState] = field(default_factory=list)
    compute_apps: list[ComputeApp] = field(default_factory=list)
    deployments: dict[str, DeploymentState] = field(default_factory=dict)  # by unit name
    problems: list[Problem] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self)))


def canonical_digest(parsed: dict[str, Any]) -> str:
    text = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def material_fingerprint(parsed: dict[str, Any]) -> dict[str, Any]:
    """The facts whose change makes an earlier decision unsafe to act on.

    GPU memory and power move all the time and are left out; a different process, model,
    unit file or GPU count is a different host as far as a change request is concerned.
    """
    fingerprint: dict[str, Any] = {"gpu_count": len(parsed.get("gpus") or [])}
    for unit, dep in sorted((parsed.get("deployments") or {}).items()):
        unit_state = dep.get("unit") or {}
        server = dep.get("server") or {}
        fingerprint[f"{unit}.active_state"] = unit_state.get("active_state")
        fingerprint[f"{unit}.main_pid"] = unit_state.get("main_pid")
        fingerprint[f"{unit}.unit_file_sha256"] = dep.get("unit_file_sha256")
        fingerprint[f"{unit}.model"] = sorted(server.get("models") or [])
        fingerprint[f"{unit}.model_root"] = sorted(server.get("model_roots") or [])
    return fingerprint


def fingerprint_drift(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Field-by-field differences between two material fingerprints."""
    keys = sorted(set(before) | set(after))
    return [
        {"field": key, "before": before.get(key), "after": after.get(key)}
        for key in keys
        if before.get(key) != after.get(key)
    ]
