"""The parsed state of a host, as the parsers produce it and snapshots store it.

Everything here is plain data: dataclasses in, JSON-ready dicts out, no I/O.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from controlplane.canonical import canonical_digest

T = TypeVar("T")


def _known(cls: type[T], data: object) -> dict[str, Any]:
    """The keys of a stored dict that `cls` has fields for; older snapshots lack newer ones."""
    if not isinstance(data, dict):
        return {}
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return {k: v for k, v in data.items() if k in names}


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
    """A process holding GPU memory, and the systemd unit (or scope) it runs in."""

    pid: int
    process_name: str
    used_memory_mib: int | None = None
    gpu_uuid: str | None = None
    unit: str | None = None  # from `ps -o unit`; None when ps could not tell


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

    @classmethod
    def from_json(cls, data: object) -> HostState:
        """The dataclasses back from a snapshot's stored `parsed` JSON (tolerant of old rows)."""
        raw = data if isinstance(data, dict) else {}
        deployments = {}
        for unit, dep in (raw.get("deployments") or {}).items():
            dep = dep if isinstance(dep, dict) else {}
            integrity = dep.get("integrity")
            deployments[unit] = DeploymentState(
                unit=UnitState(**{"unit": unit, **_known(UnitState, dep.get("unit"))}),
                unit_file_sha256=dep.get("unit_file_sha256"),
                server=ServerState(**_known(ServerState, dep.get("server"))),
                integrity=IntegrityReport(**_known(IntegrityReport, integrity))
                if isinstance(integrity, dict)
                else None,
            )
        return cls(
            gpus=[GpuState(**_known(GpuState, g)) for g in raw.get("gpus") or [] if g],
            compute_apps=[
                ComputeApp(**_known(ComputeApp, a)) for a in raw.get("compute_apps") or [] if a
            ],
            deployments=deployments,
            problems=[Problem(**_known(Problem, p)) for p in raw.get("problems") or [] if p],
        )

    # --- the questions callers ask -----------------------------------------------------

    def server(self, unit: str) -> ServerState:
        dep = self.deployments.get(unit)
        return dep.server if dep is not None else ServerState()

    def unit_state(self, unit: str) -> UnitState:
        dep = self.deployments.get(unit)
        return dep.unit if dep is not None else UnitState(unit=unit)

    def served_models(self, unit: str) -> list[str]:
        return list(self.server(unit).models)

    def inflight(self, unit: str) -> float | None:
        """Requests running plus waiting on the unit's server; None when it did not say."""
        server = self.server(unit)
        if server.requests_running is None and server.requests_waiting is None:
            return None
        return float(server.requests_running or 0) + float(server.requests_waiting or 0)

    def gpu_index_by_uuid(self) -> dict[str, int]:
        return {g.uuid: g.index for g in self.gpus if g.uuid}

    def foreign_processes(self, unit: str) -> dict[int, list[ComputeApp]]:
        """Per GPU index, the processes holding memory there that do not belong to `unit`.

        A process whose unit is unknown counts as foreign; one whose GPU is unknown counts on
        every GPU. Both err towards "it may not fit".
        """
        by_uuid = self.gpu_index_by_uuid()
        foreign: dict[int, list[ComputeApp]] = {g.index: [] for g in self.gpus}
        for app in self.compute_apps:
            if app.unit == unit:
                continue
            index = by_uuid.get(app.gpu_uuid or "")
            for gpu in foreign if index is None else [index]:
                foreign.setdefault(gpu, []).append(app)
        return foreign


def snapshot_digest(parsed: dict[str, Any]) -> str:
    """What two snapshots share when they saw the same state."""
    return canonical_digest(parsed)


def material_fingerprint(state: HostState) -> dict[str, Any]:
    """The facts whose change makes an earlier decision unsafe to act on.

    GPU memory and power move all the time and are left out; a different process, model,
    unit file or GPU count is a different host as far as a change request is concerned. So is a
    process on the GPUs that was not there before, whichever unit or session it runs in.
    """
    fingerprint: dict[str, Any] = {"gpu_count": len(state.gpus)}
    owners: dict[str, set[int]] = {}
    for app in state.compute_apps:
        owners.setdefault(app.unit or "unknown unit", set()).add(app.pid)
    for owner, pids in sorted(owners.items()):
        fingerprint[f"gpu processes of {owner}"] = sorted(pids)
    for unit, dep in sorted(state.deployments.items()):
        fingerprint[f"{unit}.active_state"] = dep.unit.active_state
        fingerprint[f"{unit}.main_pid"] = dep.unit.main_pid
        fingerprint[f"{unit}.unit_file_sha256"] = dep.unit_file_sha256
        fingerprint[f"{unit}.model"] = sorted(dep.server.models)
        fingerprint[f"{unit}.model_root"] = sorted(dep.server.model_roots)
    return fingerprint


def fingerprint_drift(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    """Field-by-field differences between two material fingerprints."""
    keys = sorted(set(before) | set(after))
    return [
        {"field": key, "before": before.get(key), "after": after.get(key)}
        for key in keys
        if before.get(key) != after.get(key)
    ]
