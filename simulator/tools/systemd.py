"""What systemctl and journalctl share: unit name mangling, unit properties, journal lines."""

from __future__ import annotations

import datetime as dt
import string
from typing import TYPE_CHECKING

from ..state import JournalEntry, cgroup, kernel_log, systemd_timestamp

if TYPE_CHECKING:
    from ..state import Machine, Run, Unit

_UNIT_CHARS = frozenset(string.ascii_letters + string.digits + ":-_.\\@")
_SUFFIXES = (
    ".service",
    ".socket",
    ".target",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".timer",
    ".path",
    ".slice",
    ".scope",
)


def mangle_unit(name: str) -> tuple[str, str]:
    """systemctl's unit_name_mangle: escape what is not allowed, default to .service."""
    escaped = ""
    for ch in name:
        if ch == "/":
            escaped += "-"
        elif ch in _UNIT_CHARS:
            escaped += ch
        else:
            escaped += "".join(f"\\x{b:02x}" for b in ch.encode())
    warning = ""
    if escaped != name:
        warning = (
            f'Invalid unit name "{name}" escaped as "{escaped}" '
            "(maybe you should use systemd-escape?).\n"
        )
    if not escaped.endswith(_SUFFIXES):
        escaped += ".service"
    return escaped, warning


def _usec(seconds: float) -> str:
    if seconds >= 1 and float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


def unit_properties(machine: Machine, name: str, unit: Unit | None) -> list[tuple[str, str]]:
    """Properties in the order systemctl prints them (the type's interface before Unit's).

    EnvironmentFiles= comes once per file (none: not at all), as systemctl prints an array.
    """
    props: list[tuple[str, str]] = []
    definition = unit.definition if unit else None
    if name.endswith(".service"):
        props += _service_properties(machine, name, unit)
    load_state = unit.load_state if unit else "not-found"
    active = unit.active_state if unit else "inactive"
    enter = unit.active_enter_wall if unit else None
    leave = unit.active_exit_wall if unit else None
    props += [
        ("Id", name),
        ("Names", name),
        ("Description", (definition.description if definition else "") or name),
        ("LoadState", load_state),
        ("ActiveState", active),
        ("FreezerState", "running"),
        ("SubState", unit.sub_state if unit else "dead"),
        ("FragmentPath", unit.fragment_path if unit else ""),
        ("DropInPaths", " ".join(p for p, _ in definition.dropins) if definition else ""),
        ("UnitFileState", "enabled" if definition else ""),
        ("StateChangeTimestamp", systemd_timestamp(max(enter or 0, leave or 0) or None)),
        ("InactiveExitTimestamp", systemd_timestamp(enter)),
        ("ActiveEnterTimestamp", systemd_timestamp(enter)),
        ("ActiveExitTimestamp", systemd_timestamp(leave)),
        ("InactiveEnterTimestamp", systemd_timestamp(leave)),
        ("NeedDaemonReload", "yes" if unit and machine.needs_daemon_reload(unit) else "no"),
    ]
    if load_state == "not-found":
        props.append(("LoadError", f'org.freedesktop.systemd1.NoSuchUnit "Unit {name} not found."'))
    return props


def _service_properties(machine: Machine, name: str, unit: Unit | None) -> list[tuple[str, str]]:
    """The Service interface: the main process, its last exit, and the cgroup's accounting
    (`[not set]` while no process runs, as systemd prints a counter it does not keep)."""
    definition = unit.definition if unit else None
    run = unit.run if unit else None
    argv = definition.exec_start if definition else ()
    exec_start = ""
    if argv:  # as written in the unit: systemd shows ExecStart= before ${VAR} expansion
        exec_start = (
            f"{{ path={argv[0]} ; argv[]={' '.join(argv)} ; ignore_errors=no ; "
            f"start_time=[{systemd_timestamp(run.started_wall if run else None) or 'n/a'}] ; "
            f"stop_time=[n/a] ; pid={run.pid if run else 0} ; code=(null) ; status=0/0 }}"
        )
    now = machine.clock()
    not_set = "[not set]"
    memory, peak = cgroup.memory_bytes(run, now, machine.inflight_running) if run else (0, 0)
    props = [
        ("Type", "simple"),
        ("ExitType", "main"),
        ("Restart", definition.restart if definition else "no"),
        ("RestartUSec", _usec(definition.restart_sec if definition else 0.1)),
        ("MainPID", str(unit.main_pid if unit else 0)),
        ("ControlPID", "0"),
        ("Result", unit.result if unit else "success"),
        ("NRestarts", str(unit.n_restarts if unit else 0)),
        ("ExecMainStartTimestamp", systemd_timestamp(unit.exec_main_start_wall if unit else None)),
        ("ExecMainPID", str(unit.exec_main_pid if unit else 0)),
        ("ExecMainCode", str(unit.exec_main_code if unit else 0)),
        ("ExecMainStatus", str(unit.exec_main_status if unit else 0)),
        ("ExecStart", exec_start),
        ("Slice", "system.slice" if definition else ""),
        ("ControlGroup", f"/system.slice/{name}" if run else ""),
        ("MemoryCurrent", str(memory) if run else not_set),
        ("MemoryPeak", str(peak) if run else not_set),
        ("CPUUsageNSec", str(cgroup.cpu_nsec(run, now)) if run else not_set),
        ("TasksCurrent", str(cgroup.tasks(run)) if run else not_set),
    ]
    for path, optional in definition.environment_files if definition else ():
        props.append(("EnvironmentFiles", f"{path} (ignore_errors={'yes' if optional else 'no'})"))
    return props


def dropin_lines(unit: Unit) -> list[str]:
    """`systemctl status`'s Drop-In: lines, one directory and its files (as loaded)."""
    if unit.definition is None or not unit.definition.dropins:
        return []
    lines: list[str] = []
    directories: dict[str, list[str]] = {}
    for path, _text in unit.definition.dropins:
        directory, _, file = path.rpartition("/")
        directories.setdefault(directory, []).append(file)
    for n, (directory, files) in enumerate(directories.items()):
        lines.append(("    Drop-In: " if n == 0 else "             ") + directory)
        lines.append("             └─" + ", ".join(files))
    return lines


def resource_lines(machine: Machine, run: Run) -> list[str]:
    """`systemctl status`'s Tasks:, Memory: and CPU: lines of a running unit."""
    now = machine.clock()
    memory, peak = cgroup.memory_bytes(run, now, machine.inflight_running)
    return [
        f"      Tasks: {cgroup.tasks(run)} (limit: 2315148)",
        f"     Memory: {format_bytes(memory)} (peak: {format_bytes(peak)})",
        f"        CPU: {format_timespan(cgroup.cpu_nsec(run, now) / 1e9)}",
    ]


def format_bytes(size: int) -> str:
    """systemd's format_bytes(): 1024-based, one decimal, B/K/M/G/T."""
    value = float(size)
    for suffix in ("B", "K", "M", "G", "T"):
        if value < 1024 or suffix == "T":
            return f"{int(value)}B" if suffix == "B" else f"{value:.1f}{suffix}"
        value /= 1024
    return f"{size}B"


def format_timespan(seconds: float) -> str:
    """systemd's format_timespan() to the millisecond: `2d 3h 4min 5.123s`."""
    parts = []
    whole = int(seconds)
    for unit, span in (("w", 604800), ("d", 86400), ("h", 3600), ("min", 60)):
        if whole >= span:
            parts.append(f"{whole // span}{unit}")
            whole %= span
    millis = round((seconds - int(seconds)) * 1000)
    parts.append(f"{whole}.{millis:03d}s" if millis else f"{whole}s")
    return " ".join(parts)


def short_line(machine: Machine, entry: JournalEntry) -> str:
    """A journal entry in journalctl's default `short` format."""
    stamp = dt.datetime.fromtimestamp(entry.wall, dt.UTC).strftime("%b %d %H:%M:%S")
    who = entry.ident if kernel_log.is_kernel(entry) else f"{entry.ident}[{entry.pid}]"
    return f"{stamp} {machine.name} {who}: {entry.message}"
