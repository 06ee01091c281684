"""The whole probe: every section parsed into a HostState, never raising."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import probe_sections as catalog
from ..state import (
    DeploymentState,
    HostState,
    IntegrityReport,
    ServerState,
    Topology,
    UnitState,
)
from . import probe_gpu
from .collector import Collector
from .common import (
    HttpResult,
    Section,
    first_line,
    parse_epoch_seconds,
)
from .dcgm import parse_gpu_diagnostic
from .http import parse_generation_tokens, parse_http, parse_models_json, parse_vllm_metrics
from .integrity import parse_integrity
from .nvidia import parse_compute_apps, parse_gpu_csv
from .nvidia_details import parse_gpu_details, parse_smi_version, parse_topology
from .nvidia_read import read_smi
from .probe_units import (
    parse_environment_files,
    parse_journal_section,
    parse_unit_files,
    redact_sections,
)
from .processes import parse_process_units
from .reuse import SectionMemo
from .sections import split_sections
from .systemd import parse_sha256sum, parse_systemctl_show

# --- the whole probe -----------------------------------------------------------------------


@dataclass
class ProbeParse:
    state: HostState
    sections: dict[str, Section] = field(default_factory=dict)


def _read_gpus(out: Collector, state: HostState) -> None:
    state.gpus = read_smi(out, catalog.GPUS.name, parse_gpu_csv, benign_exit=6)
    probe_gpu.read_lost_gpus(out, state)


def _read_compute_apps(out: Collector, state: HostState) -> None:
    state.compute_apps = read_smi(out, catalog.COMPUTE_APPS.name, parse_compute_apps, benign_exit=6)


def _read_process_owners(out: Collector, state: HostState) -> None:
    """Name the unit each GPU process runs in, from the `processes` section."""
    section = out.take(catalog.PROCESSES.name)
    if section is None:
        return
    before = len(out.problems)
    owners = out.attempt(section.name, lambda: parse_process_units(section.output))
    out.check_exit(section, "ps", before)
    if owners:
        # new objects: those read from `compute_apps` may be the previous probe's too
        # (hosts.parsers.reuse), and a later read of that section must not see these units
        state.compute_apps = [
            dataclasses.replace(app, unit=owners.get(app.pid)) for app in state.compute_apps
        ]


def _read_gpu_details(out: Collector, state: HostState) -> None:
    state.gpu_details = read_smi(out, catalog.GPU_DETAILS.name, parse_gpu_details, benign_exit=6)


def _read_smi_version(out: Collector, state: HostState) -> None:
    """The driver and CUDA versions."""
    version = out.take(catalog.SMI_VERSION.name)
    if version is not None:
        before = len(out.problems)
        versions = out.attempt(version.name, lambda: parse_smi_version(version.output))
        if versions is not None:
            state.driver_version, state.cuda_version = versions
        if versions != (None, None):  # (None, None): a driver without --version, exit 2
            out.check_exit(version, "nvidia-smi", before)


def _read_topology(out: Collector, state: HostState) -> None:
    topology = out.take(catalog.TOPOLOGY.name)
    if topology is not None and first_line(topology.output) != "No devices were found":

        def read() -> Topology | None:
            assert topology is not None
            before = len(out.problems)
            found = out.attempt(topology.name, lambda: parse_topology(topology.output))
            out.check_exit(topology, "nvidia-smi", before)
            return found  # type: ignore[no-any-return]

        state.topology = out.reuse(topology, _read_topology, read)


def _read_clock(out: Collector, state: HostState) -> None:
    """The host's clock when probed (`date +%s`)."""
    section = out.take(catalog.CLOCK.name)
    if section is None:
        return
    before = len(out.problems)
    state.host_time = out.attempt(section.name, lambda: parse_epoch_seconds(section.output))
    out.check_exit(section, "date", before)


# The reader of each host section (hosts.probe_sections.HOST_SECTIONS), run in its order.
HOST_READERS: dict[str, Callable[[Collector, HostState], None]] = {
    catalog.GPUS.name: _read_gpus,
    catalog.COMPUTE_APPS.name: _read_compute_apps,
    catalog.PROCESSES.name: _read_process_owners,
    catalog.GPU_DETAILS.name: _read_gpu_details,
    catalog.SMI_VERSION.name: _read_smi_version,
    catalog.TOPOLOGY.name: _read_topology,
    catalog.CLOCK.name: _read_clock,
    catalog.GPU_ERRORS.name: probe_gpu.read_gpu_errors,
    catalog.REMAPPED_ROWS.name: probe_gpu.read_remapped_rows,
    catalog.NVLINK_STATUS.name: probe_gpu.read_nvlink_status,
    catalog.NVLINK_ERRORS.name: probe_gpu.read_nvlink_errors,
    catalog.XID_EVENTS.name: probe_gpu.read_xid_events,
}


def _parse_unit(out: Collector, unit: str) -> UnitState:
    section = out.take(catalog.UNIT_SHOW.name(unit))
    if section is None:
        return UnitState(unit=unit)
    before = len(out.problems)
    state = out.attempt(section.name, lambda: parse_systemctl_show(section.output, unit))
    out.check_exit(section, "systemctl", before)
    return state if isinstance(state, UnitState) else UnitState(unit=unit)


def _parse_unit_file(out: Collector, unit: str) -> str | None:
    section = out.take(catalog.UNIT_FILE_HASH.name(unit))
    if section is None:
        return None
    digest: str | None = out.attempt(section.name, lambda: parse_sha256sum(section.output))
    return digest


def _http_answer(out: Collector, section: Section) -> HttpResult | None:
    """The curl result of a section, or None (with a Problem) if curl itself did not answer."""
    result = parse_http(section.output)
    if result.error == "truncated":  # complete section, yet no trailer: curl did not run
        detail = first_line(section.output)
        out.add(section.name, "no HTTP status in output" + (f": {detail}" if detail else ""))
        return None
    return result


def _usable_body(out: Collector, name: str, result: HttpResult | None) -> str | None:
    """A 200 body worth parsing. Unreachable or non-200 is normal (stopped or loading server),
    except 401 and 403: the server answers, but what it serves cannot be seen."""
    if result is not None and result.status in (401, 403):
        out.add(
            name,
            f"answered {result.status}: the server requires an API key, and the key its unit "
            "gives (--api-key, or VLLM_API_KEY in Environment= or an EnvironmentFile=) was not "
            "found or was refused, so what it serves is unknown",
        )
        return None
    if result is None or result.status != 200:
        return None
    if result.error is not None:  # a 200 whose transfer failed half-way
        out.add(name, f"incomplete response: {result.error}")
        return None
    return result.body


_ServerPart = Callable[[Collector, str, HttpResult | None], tuple[Any, ...]]


def _server_part(out: Collector, name: str, read: _ServerPart) -> tuple[Any, ...] | None:
    """`read` of what curl printed in section `name` (None: no HTTP answer), each unchanged
    section's as the host's previous probe read it (hosts.parsers.reuse); None when the
    section is missing or cut short."""
    section = out.take(name)
    if section is None:
        return None
    return out.reuse(section, read, lambda: read(out, section.name, _http_answer(out, section)))


def _health(out: Collector, name: str, health: HttpResult | None) -> tuple[Any, ...]:
    if health is None:
        return ()
    healthy = health.status == 200 and health.error is None
    return health.status, healthy, health.error if health.status is None else None


def _models(out: Collector, name: str, result: HttpResult | None) -> tuple[Any, ...]:
    body = _usable_body(out, name, result)
    if body is None:
        return ()
    models = out.attempt(name, lambda: parse_models_json(body))
    return () if models is None else tuple(models)


def _metrics(out: Collector, name: str, result: HttpResult | None) -> tuple[Any, ...]:
    body = _usable_body(out, name, result)
    if body is None:
        return ()
    values = out.attempt(name, lambda: parse_vllm_metrics(body))
    tokens = out.attempt(name, lambda: parse_generation_tokens(body))
    return values, tokens


def _parse_server(out: Collector, unit: str) -> ServerState:
    server = ServerState()
    name = catalog.HEALTH.name(unit)
    health = _server_part(out, name, _health)
    if health:
        server.health_http_status, server.healthy, server.health_error = health
    name = catalog.MODELS.name(unit)
    models = _server_part(out, name, _models)
    if models:
        models_seen, roots, server.max_model_len = models
        server.models, server.model_roots = list(models_seen), list(roots)
    name = catalog.METRICS.name(unit)
    metrics = _server_part(out, name, _metrics)
    if metrics:
        values, server.generation_tokens_total = metrics
        if values is not None:
            server.requests_running, server.requests_waiting, server.kv_cache_usage = values
    return server


def _parse_integrity_section(out: Collector, unit: str) -> IntegrityReport | None:
    section = out.take(catalog.INTEGRITY.name(unit))
    if section is None:
        return None
    report = parse_integrity(section.output)
    # The script's own {"error": ...} (exit 3) is a finding; anything else means unreadable.
    answered = report.error is None or (report.dist is not None and section.exit_status == 3)
    if not answered:
        out.add(section.name, report.error or "unreadable output")
    elif report.error is None and section.exit_status:
        out.add(section.name, f"integrity check exited with status {section.exit_status}")
    return report


def _integrity_units(integrity: bool | Collection[str], units: Sequence[str]) -> frozenset[str]:
    if isinstance(integrity, bool):
        return frozenset(units) if integrity else frozenset()
    if isinstance(integrity, str):
        return frozenset({integrity})
    return frozenset(integrity)


def parse_probe(
    stdout: str,
    units: Sequence[str],
    *,
    integrity: bool | Collection[str],
    environment_files: Mapping[str, Sequence[str]] | None = None,
    journal_lines: Mapping[str, int] | None = None,
    gpu_diagnostic: int = 0,
    memo: SectionMemo | None = None,
) -> ProbeParse:
    """Everything the probe script printed, as a HostState. Never raises on remote output.

    Each section that is missing, cut short, unreadable or failed unexpectedly adds a Problem
    and leaves its part empty. A stopped unit or an unreachable server is a state, not a
    problem. `integrity` is True when every unit was checked, or the units that were (the
    probe skips those without an engine interpreter). `environment_files` and `journal_lines`
    say, per unit, what the spec asked for (commands.ServerSpec). The sections returned are
    redacted: environment and unit files have their secret values replaced, so what is
    stored as raw output holds no more than the parsed state does.

    `memo`, made from the memo of the host's previous probe, reads again only the sections
    whose output changed since (hosts.parsers.reuse); the result is the same either way.
    """
    return parse_sections(
        split_sections(stdout),
        units,
        integrity=integrity,
        environment_files=environment_files,
        journal_lines=journal_lines,
        gpu_diagnostic=gpu_diagnostic,
        memo=memo,
    )


def parse_sections(
    sections: dict[str, Section],
    units: Sequence[str],
    *,
    integrity: bool | Collection[str],
    environment_files: Mapping[str, Sequence[str]] | None = None,
    journal_lines: Mapping[str, int] | None = None,
    gpu_diagnostic: int = 0,
    memo: SectionMemo | None = None,
) -> ProbeParse:
    """parse_probe of output already split into its sections (split_sections)."""
    out = Collector(sections, memo)
    state = HostState()
    for section in catalog.HOST_SECTIONS:
        HOST_READERS[section.name](out, state)
    if gpu_diagnostic:  # asked for: a section cut short or missing is a problem
        diagnostic = out.take(catalog.GPU_DIAGNOSTIC)
        if diagnostic is not None:
            state.gpu_diagnostic = parse_gpu_diagnostic(diagnostic.output, gpu_diagnostic)
    checked = _integrity_units(integrity, units)
    for unit in units:
        unit_state = _parse_unit(out, unit)
        digest = _parse_unit_file(out, unit)
        files = parse_unit_files(out, unit, unit_state, digest)
        requested = (environment_files or {}).get(unit, ())
        state.deployments[unit] = DeploymentState(
            unit=unit_state,
            unit_file_sha256=digest,
            unit_files=files,
            environment_files=parse_environment_files(out, unit, unit_state, files, requested),
            server=_parse_server(out, unit),
            journal=parse_journal_section(out, unit, (journal_lines or {}).get(unit, 0)),
            integrity=_parse_integrity_section(out, unit) if unit in checked else None,
        )
    state.problems = out.problems
    return ProbeParse(state=state, sections=redact_sections(sections, memo))
