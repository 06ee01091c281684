"""What systemctl and journalctl share: unit name mangling, unit properties, journal lines."""

from __future__ import annotations

import datetime as dt
import string
from typing import TYPE_CHECKING

from ..state import JournalEntry, systemd_timestamp

if TYPE_CHECKING:
    from ..state import Machine, Unit

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
    """Properties in the order systemctl prints them (the type's interface before Unit's)."""
    props: list[tuple[str, str]] = []
    definition = unit.definition if unit else None
    run = unit.run if unit else None
    if name.endswith(".service"):
        argv = definition.exec_start if definition else ()
        exec_start = ""
        if argv:
            exec_start = (
                f"{{ path={argv[0]} ; argv[]={' '.join(argv)} ; ignore_errors=no ; "
                f"start_time=[{systemd_timestamp(run.started_wall if run else None) or 'n/a'}] ; "
                f"stop_time=[n/a] ; pid={run.pid if run else 0} ; code=(null) ; status=0/0 }}"
            )
        props += [
            ("Type", "simple"),
            ("ExitType", "main"),
            ("Restart", definition.restart if definition else "no"),
            ("RestartUSec", _usec(definition.restart_sec if definition else 0.1)),
            ("MainPID", str(unit.main_pid if unit else 0)),
            ("ControlPID", "0"),
            ("Result", unit.result if unit else "success"),
            ("NRestarts", str(unit.n_restarts if unit else 0)),
            ("ExecMainStartTimestamp", systemd_timestamp(run.started_wall) if run else ""),
            ("ExecMainPID", str(run.pid if run else 0)),
            ("ExecStart", exec_start),
        ]
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


def short_line(machine: Machine, entry: JournalEntry) -> str:
    """A journal entry in journalctl's default `short` format."""
    stamp = dt.datetime.fromtimestamp(entry.wall, dt.UTC).strftime("%b %d %H:%M:%S")
    return f"{stamp} {machine.name} {entry.ident}[{entry.pid}]: {entry.message}"
