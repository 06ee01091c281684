"""The probe's sections, declared once: what each runs on the host, what it fills in the
parsed state, whether its output is stored as it is, and which fingerprint fields it decides.

The probe is one script of these sections (`probe_script`); `hosts.parsers.probe` reads each
host section with the reader registered under its name, in the order declared here, and the
sections of each unit together into that unit's `DeploymentState`. Adding a host fact is one
entry here, its command in `hosts.commands`, its parser, its reader and its state field.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from . import commands
from .commands import ProbeSpec, ServerSpec, UnsafeCommand, with_sudo


@dataclass(frozen=True)
class HostSection:
    """A section run once per probe, about the machine."""

    name: str
    command: Callable[[], list[str]]
    fills: str  # the HostState field its reader fills
    # Fingerprint fields (or their prefixes) read from it: unknown when it failed.
    fingerprint: tuple[str, ...] = ()
    # A tool's fixed format of numbers, names, paths and hashes, with no free text a secret
    # could travel in: stored without the secret scan (pages and the API still redact).
    verbatim: bool = True
    # Read under `sudo -n` on hosts that say so (the kernel log needs a privileged group).
    sudo: bool = False


@dataclass(frozen=True)
class UnitSection:
    """A section run for each unit the host is expected to run, named `<prefix>:<unit>`, or
    `<prefix>:<unit>:<path>` for one per environment file."""

    prefix: str
    # (name, argv) of each of its sections for one server; None: run by another entry.
    commands: Callable[[ServerSpec, ProbeSpec], Iterator[tuple[str, list[str]]]] | None
    what: str
    verbatim: bool = False

    def name(self, unit: str, path: str | None = None) -> str:
        return f"{self.prefix}:{unit}" if path is None else f"{self.prefix}:{unit}:{path}"


GPUS = HostSection("gpus", commands.gpu_query, "gpus", fingerprint=("gpu_count",))
COMPUTE_APPS = HostSection(
    "compute_apps", commands.compute_apps_query, "compute_apps", ("gpu processes of ",)
)
PROCESSES = HostSection("processes", commands.process_units, "compute_apps")  # their owners
GPU_DETAILS = HostSection("gpu_details", commands.gpu_details_query, "gpu_details")
SMI_VERSION = HostSection("nvidia_smi_version", commands.smi_version, "driver_version")
TOPOLOGY = HostSection("gpu_topology", commands.gpu_topology, "topology")
CLOCK = HostSection("clock", commands.host_clock, "host_time")
GPU_ERRORS = HostSection("gpu_errors", commands.gpu_errors_query, "gpu_errors")
REMAPPED_ROWS = HostSection("remapped_rows", commands.remapped_rows_query, "gpu_errors")
NVLINK_STATUS = HostSection("nvlink_status", commands.nvlink_status, "nvlinks")
NVLINK_ERRORS = HostSection("nvlink_errors", commands.nvlink_errors, "nvlinks")
# Kernel messages are free text (a driver may log a process's name): scanned like a journal.
XID_EVENTS = HostSection(
    "xid_events", commands.kernel_xids, "xid_events", verbatim=False, sudo=True
)

# DCGM's diagnostic: not one of HOST_SECTIONS, run only when the probe's spec asks for it.
GPU_DIAGNOSTIC = "gpu_diagnostic"

HOST_SECTIONS: tuple[HostSection, ...] = (
    GPUS,
    COMPUTE_APPS,
    PROCESSES,
    GPU_DETAILS,
    SMI_VERSION,
    TOPOLOGY,
    CLOCK,
    GPU_ERRORS,  # before XID_EVENTS: an Xid names its GPU by the PCI bus id read here
    REMAPPED_ROWS,
    NVLINK_STATUS,
    NVLINK_ERRORS,
    XID_EVENTS,
)


def _one(name: str, build: Callable[[ServerSpec], list[str]]) -> Callable[..., Iterator]:
    def sections(server: ServerSpec, spec: ProbeSpec) -> Iterator[tuple[str, list[str]]]:
        yield f"{name}:{server.unit}", build(server)

    return sections


def _environment_files(server: ServerSpec, spec: ProbeSpec) -> Iterator[tuple[str, list[str]]]:
    if len(server.environment_files) > commands.MAX_ENVIRONMENT_FILES:
        raise UnsafeCommand(f"refusing to read more than {commands.MAX_ENVIRONMENT_FILES} files")
    for path in dict.fromkeys(server.environment_files):
        yield (
            ENV_HASH.name(server.unit, path),
            with_sudo(commands.file_hash(path), spec.sudo),
        )
        yield ENV_FILE.name(server.unit, path), with_sudo(commands.file_read(path), spec.sudo)


def _journal(server: ServerSpec, spec: ProbeSpec) -> Iterator[tuple[str, list[str]]]:
    if server.journal_lines:
        journal = commands.unit_journal_tail(server.unit, server.journal_lines)
        yield JOURNAL.name(server.unit), with_sudo(journal, spec.sudo)


def _integrity(server: ServerSpec, spec: ProbeSpec) -> Iterator[tuple[str, list[str]]]:
    if spec.integrity and server.engine_python:
        yield (
            INTEGRITY.name(server.unit),
            commands.integrity_check(server.engine_python, server.engine_dist),
        )


UNIT_SHOW = UnitSection(
    "unit", _one("unit", lambda s: commands.unit_show(s.unit)), "systemctl show", verbatim=True
)
UNIT_FILE_HASH = UnitSection(
    "unitfile",
    _one("unitfile", lambda s: commands.unit_file_hash(s.unit)),
    "the fragment's sha256",
    verbatim=True,
)
UNIT_CAT = UnitSection(
    "unitcat", _one("unitcat", lambda s: commands.unit_cat(s.unit)), "systemctl cat (redacted)"
)
# Each environment file's hash runs beside its contents, from ENV_FILE's commands.
ENV_HASH = UnitSection("envhash", None, "an environment file's sha256", verbatim=True)
ENV_FILE = UnitSection("envfile", _environment_files, "an environment file (redacted)")
HEALTH = UnitSection(
    "health", _one("health", lambda s: commands.http_get(s.port, "/health")), "GET /health"
)
MODELS = UnitSection(
    "models", _one("models", lambda s: commands.http_get(s.port, "/v1/models")), "GET /v1/models"
)
METRICS = UnitSection(
    "metrics",
    _one("metrics", lambda s: commands.http_get(s.port, "/metrics")),
    "GET /metrics",
    verbatim=True,
)
JOURNAL = UnitSection("journal", _journal, "the unit's newest journal lines")
INTEGRITY = UnitSection("integrity", _integrity, "the engine's files against their RECORD")

UNIT_SECTIONS: tuple[UnitSection, ...] = (
    UNIT_SHOW,
    UNIT_FILE_HASH,
    UNIT_CAT,
    ENV_HASH,
    ENV_FILE,
    HEALTH,
    MODELS,
    METRICS,
    JOURNAL,
    INTEGRITY,
)

_VERBATIM_HOST = frozenset(s.name for s in HOST_SECTIONS if s.verbatim)
_VERBATIM_UNIT = tuple(s.prefix + ":" for s in UNIT_SECTIONS if s.verbatim)


def stored_verbatim(name: str) -> bool:
    """Whether section `name` is stored as the host printed it (see HostSection.verbatim)."""
    return name in _VERBATIM_HOST or name.startswith(_VERBATIM_UNIT)


def unknown_fingerprint_fields(failed_sections: set[str]) -> tuple[str, ...]:
    """Prefixes of the fingerprint fields that the failed sections would have decided."""
    return tuple(
        f
        for section in HOST_SECTIONS
        if section.name in failed_sections
        for f in section.fingerprint
    )


def probe_sections(spec: ProbeSpec) -> list[tuple[str, list[str]]]:
    """The read-only commands of one probe, each with the section name its output lands in:
    every host section, then each unit's (see UNIT_SECTIONS; environment files' hashes and
    contents per path named by `ServerSpec.environment_files`, whose secrets the parser
    redacts before anything is stored; the journal tail when `journal_lines` asks for one)."""
    sections = [
        (section.name, with_sudo(section.command(), spec.sudo and section.sudo))
        for section in HOST_SECTIONS
    ]
    if spec.gpu_diagnostic:
        sections.append((GPU_DIAGNOSTIC, commands.gpu_diagnostic(spec.gpu_diagnostic)))
    for server in spec.servers:
        for unit_section in UNIT_SECTIONS:
            if unit_section.commands is not None:
                sections += unit_section.commands(server, spec)
    return sections


def probe_script(spec: ProbeSpec) -> str:
    return framed(probe_sections(spec))


def api_key_sources_script(server: ServerSpec, *, sudo: bool) -> str:
    """The probe's sections that say which API key a unit's server takes (its unit files and
    the environment files they name), alone: what a change job reads before it calls the
    server (hosts.parsers.api_keys)."""
    unit = server.unit
    wanted = {UNIT_CAT.name(unit), *(ENV_FILE.name(unit, p) for p in server.environment_files)}
    sections = probe_sections(ProbeSpec(servers=(server,), sudo=sudo))
    # One line: a job's step records it as the one command line the host received.
    return (
        framed([(name, argv) for name, argv in sections if name in wanted])
        .strip()
        .replace("\n", "; ")
    )


def framed(sections: list[tuple[str, list[str]]]) -> str:
    """The script that runs each command framed by its section's marker lines."""
    lines = []
    for name, argv in sections:
        begin = shlex.quote(commands.MARK_BEGIN + name)
        end = shlex.quote(f"{commands.MARK_END}{name}:")
        lines.append(f'echo {begin}; {commands.join(argv)} 2>&1; echo {end}"$?"')
    return "\n".join(lines) + "\n"
