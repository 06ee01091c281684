"""The parsed state of a host, as the parsers produce it and snapshots store it.

Everything here is plain data: dataclasses in, JSON-ready dicts out, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controlplane.canonical import canonical_digest

from .state_gpu import GpuDiagnostic, GpuErrors, GpuNvLinks, LostGpu, XidEvent
from .state_json import plain, read_json


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
class GpuDetails:
    """What `nvidia-smi -q` would tell an engineer about one GPU beyond memory and power.

    From the `gpu_details` section; None where the GPU does not support a reading (`[N/A]`).
    """

    index: int
    driver_version: str | None = None
    pstate: str | None = None
    persistence_mode: bool | None = None
    ecc_corrected_volatile: int | None = None  # None: no ECC on this GPU, or ECC off
    ecc_uncorrected_volatile: int | None = None
    clock_sm_mhz: int | None = None
    clock_mem_mhz: int | None = None
    clock_max_sm_mhz: int | None = None
    clock_event_reasons: int | None = None  # NVML's bitmask, as nvidia-smi prints it in hex
    clock_event_reason_names: list[str] = field(default_factory=list)  # decoded, for people
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None


@dataclass
class Topology:
    """`nvidia-smi topo -m` between the GPUs: links[i][j] is how GPU i reaches GPU j.

    Each link is nvidia-smi's own word: X (self), SYS, NODE, PHB, PXB, PIX or NV<n>.
    """

    links: list[list[str]] = field(default_factory=list)
    nvlink: bool = False
    summary: str = ""
    cpu_affinity: list[str | None] = field(default_factory=list)  # per GPU, e.g. "0-47,96-143"
    numa_affinity: list[str | None] = field(default_factory=list)  # per GPU, e.g. "0"


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
    # How the last start went: the main process (also after it exited) and systemd's verdict.
    result: str | None = None  # success, exit-code, signal, resources, start-limit-hit, ...
    exec_main_start_timestamp: str | None = None
    exec_main_pid: int | None = None
    exec_main_code: int | None = None  # siginfo code: 1 exited, 2 killed, 3 dumped core
    exec_main_status: int | None = None  # exit status, or the signal number when killed
    # What the unit's cgroup uses now; None when systemd does not account it (not running).
    memory_current_bytes: int | None = None
    memory_peak_bytes: int | None = None
    cpu_usage_nsec: int | None = None
    tasks_current: int | None = None
    control_group: str | None = None
    # How the unit is configured: drop-ins, enablement, and whether the loaded copy is stale.
    drop_in_paths: list[str] = field(default_factory=list)
    unit_file_state: str | None = None  # enabled, disabled, static, ...
    need_daemon_reload: bool | None = None
    # EnvironmentFile= as systemd loaded it, in its own notation: "-/path" is optional.
    environment_files: list[str] = field(default_factory=list)


@dataclass
class ServerState:
    """What the inference server behind a unit says about itself over HTTP."""

    healthy: bool = False
    health_http_status: int | None = None
    # curl's error when /health gave no answer at all: a vLLM that is loading (or whose API
    # server died) has no listening socket, so this is "connection refused".
    health_error: str | None = None
    models: list[str] = field(default_factory=list)  # served ids from /v1/models
    model_roots: list[str] = field(default_factory=list)  # "root" of each (path or HF id)
    max_model_len: int | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    # Tokens generated since the server started (a counter): flat across two probes while
    # requests wait means nothing is being served.
    generation_tokens_total: float | None = None


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

    @classmethod
    def from_json(cls, data: object) -> IntegrityReport | None:
        """A report back from stored JSON; None when the probe did not check (not a dict)."""
        try:
            return read_json(cls, data)
        except ValueError:
            return None


@dataclass
class Problem:
    """A section that could not be read cleanly. It makes the snapshot `partial`."""

    section: str
    message: str


def problem_lines(problems: list[Problem]) -> list[str]:
    """One line per distinct message, naming every section it hit: a driver failure fails five
    nvidia-smi reads with the same words, which a person should read once."""
    sections: dict[str, list[str]] = {}
    for problem in problems:
        sections.setdefault(problem.message, []).append(problem.section)
    return [f"{', '.join(names)}: {message}" for message, names in sections.items()]


@dataclass
class UnitFile:
    """One file of a unit as `systemctl cat` printed it: the fragment, or a drop-in.

    `text` has its secrets (the values of secret-looking Environment= keys, --api-key, whatever
    controlplane.redaction finds) replaced by `<redacted>`; `sha256` is of the file as it is on
    the host, so a change still shows.
    """

    path: str
    text: str
    sha256: str


@dataclass
class EnvironmentFile:
    """A file named by EnvironmentFile=, read as systemd reads it when the unit starts.

    `sha256` is of the real bytes (from sha256sum on the host); `variables` has the value of
    every secret-looking key (controlplane.redaction.is_secret_name) as `<redacted>`.
    A missing file has `missing` set; for an optional one (`-` in the unit) that is harmless,
    for a mandatory one the unit's next start fails.
    """

    path: str
    sha256: str | None = None
    variables: dict[str, str] = field(default_factory=dict)
    optional: bool = False
    missing: bool = False


@dataclass
class DeploymentState:
    unit: UnitState
    unit_file_sha256: str | None = None
    server: ServerState = field(default_factory=ServerState)
    integrity: IntegrityReport | None = None
    unit_files: list[UnitFile] = field(default_factory=list)  # fragment first, then drop-ins
    environment_files: list[EnvironmentFile] = field(default_factory=list)
    journal: list[str] | None = None  # the newest lines, when the probe asked for them


@dataclass
class HostState:
    gpus: list[GpuState] = field(default_factory=list)
    compute_apps: list[ComputeApp] = field(default_factory=list)
    deployments: dict[str, DeploymentState] = field(default_factory=dict)  # by unit name
    problems: list[Problem] = field(default_factory=list)
    gpu_details: list[GpuDetails] = field(default_factory=list)
    driver_version: str | None = None  # `nvidia-smi --version`; None on drivers without it
    cuda_version: str | None = None
    topology: Topology | None = None
    # The host's own clock when probed (`date +%s`): systemd's timestamps are on it.
    host_time: int | None = None
    gpu_errors: list[GpuErrors] = field(default_factory=list)
    nvlinks: list[GpuNvLinks] = field(default_factory=list)  # GPUs with NVLink only
    xid_events: list[XidEvent] = field(default_factory=list)  # this boot's, oldest first
    lost_gpus: list[LostGpu] = field(default_factory=list)
    gpu_diagnostic: GpuDiagnostic | None = None  # only in a probe that asked for one

    def to_json(self) -> dict[str, Any]:
        as_json: dict[str, Any] = plain(self)
        return as_json

    @classmethod
    def from_json(cls, data: object) -> HostState:
        """The dataclasses back from a snapshot's stored `parsed` JSON (tolerant of old rows)."""
        raw = dict(data) if isinstance(data, dict) else {}
        deployments = raw.get("deployments")
        if isinstance(deployments, dict):  # a unit's state is named by its key when it is not
            raw["deployments"] = {
                unit: {**dep, "unit": {"unit": unit, **_dict(dep.get("unit"))}}
                for unit, dep in deployments.items()
                if isinstance(dep, dict)
            }
        return read_json(cls, raw)

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


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def snapshot_digest(parsed: dict[str, Any]) -> str:
    """What two snapshots share when they saw the same state."""
    return canonical_digest(parsed)


def material_fingerprint(state: HostState) -> dict[str, Any]:
    """The facts whose change makes an earlier decision unsafe to act on.

    GPU memory and power move all the time and are left out; a different process, model,
    unit file, drop-in, environment file or GPU count is a different host as far as a change
    request is concerned. So is a process on the GPUs that was not there before, whichever unit
    or session it runs in. Drop-ins and environment files count by their hashes (an environment
    file's is of its real bytes, so a changed secret shows although its value is never stored).
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
        fingerprint[f"{unit}.drop_ins"] = sorted([f.path, f.sha256] for f in dep.unit_files[1:])
        fingerprint[f"{unit}.environment_files"] = sorted(
            [f.path, f.sha256] for f in dep.environment_files
        )
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
