"""systemctl: start, stop and restart units, daemon-reload, and show, cat or status them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..state import systemd_timestamp
from .interface import Context, Result
from .systemd import dropin_lines, mangle_unit, resource_lines, short_line, unit_properties

if TYPE_CHECKING:
    from ..state import Machine, Unit

_NEEDS_ARG = ("-p", "--property", "-t", "--type", "--state", "-n", "--lines", "-o", "--output")
_LONG_FLAGS = frozenset(
    {
        "--no-pager",
        "--no-block",
        "--no-ask-password",
        "--quiet",
        "--all",
        "--no-legend",
        "--plain",
        "--full",
        "--value",
        "--system",
        "--now",
    }
)
_SHORT_FLAGS = {"q": "--quiet", "a": "--all", "l": "--full", "f": "--force"}


@dataclass
class _Call:
    """One systemctl command after its options: the verb, its unit names and the flags."""

    ctx: Context
    result: Result
    verb: str
    names: list[str]
    properties: list[str]
    flags: set[str]

    @property
    def machine(self) -> Machine:
        return self.ctx.machine

    def resolve(self, raw: str) -> str:
        """The unit name systemctl uses; the warning about escaping it unless --quiet."""
        name, warning = mangle_unit(raw)
        if warning and "--quiet" not in self.flags:
            self.result.err(warning)
        return name


def systemctl(ctx: Context, argv: list[str], stdin: str) -> Result | Awaitable[Result]:
    parsed = _options(argv[1:])
    if isinstance(parsed, Result):
        return parsed
    properties, flags, words = parsed
    if not words:
        return Result().err("Too few arguments.\n").exit(1)  # list-units would be the default
    ctx.machine.tick()
    call = _Call(ctx, Result(), words[0], words[1:], properties, flags)
    verb = _VERBS.get(call.verb)
    if verb is None:
        return call.result.err(f"Unknown command verb '{call.verb}'.\n").exit(1)
    return verb(call)


def _options(args: list[str]) -> tuple[list[str], set[str], list[str]] | Result:
    """(properties asked for, flags, the verb and its words), or the error systemctl exits with."""
    properties: list[str] = []
    flags: set[str] = set()
    words: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            words += args[i + 1 :]
            break
        if arg.startswith("--") and "=" in arg:
            key, value = arg.split("=", 1)
            if key == "--property":
                properties += value.split(",")
            flags.add(key)
        elif arg in _NEEDS_ARG:
            value = args[i + 1] if i + 1 < len(args) else ""
            if arg in ("-p", "--property"):
                properties += value.split(",")
            flags.add(arg)
            i += 1
        elif arg.startswith("-p") and len(arg) > 2:
            properties += arg[2:].split(",")
        elif arg.startswith("--"):
            if arg not in _LONG_FLAGS:
                return Result().err(f"systemctl: unrecognized option '{arg}'\n").exit(1)
            flags.add(arg)
        elif arg.startswith("-") and len(arg) > 1:
            for ch in arg[1:]:
                if ch not in _SHORT_FLAGS:
                    return Result().err(f"systemctl: invalid option -- '{ch}'\n").exit(1)
                flags.add(_SHORT_FLAGS[ch])
        else:
            words.append(arg)
        i += 1
    return properties, flags, words


def _daemon_reload(call: _Call) -> Result:
    if not call.ctx.as_root:
        return call.result.err(
            "Failed to reload daemon: Interactive authentication required.\n"
        ).exit(1)
    call.machine.daemon_reload()
    return call.result


def _change(call: _Call) -> Result | Awaitable[Result]:
    """start, stop, restart, try-restart and reload-or-restart, unit by unit. Without
    --no-block, systemctl waits for the jobs to finish: a draining stop takes its time."""
    result = _change_units(call)
    waiting = [u for u in call.machine.units.values() if u.stopping is not None]
    if "--no-block" in call.flags or not waiting:
        return result
    return _wait_stopped(call, waiting)


async def _wait_stopped(call: _Call, units: list[Unit]) -> Result:
    machine = call.machine
    while True:
        machine.tick()
        if all(u.stopping is None for u in units):
            return call.result
        await asyncio.sleep(max(0.01, 0.5 * machine.time_scale))


def _change_units(call: _Call) -> Result:
    result, verb, machine = call.result, call.verb, call.machine
    if not call.names:
        return result.err("Too few arguments.\n").exit(1)
    for raw in call.names:
        name = call.resolve(raw)
        if not call.ctx.as_root:
            result.err(
                f"Failed to {verb} {name}: Interactive authentication required.\n"
                f"See system logs and 'systemctl status {name}' for details.\n"
            ).exit(1)
            continue
        unit = machine.lookup_unit(name)
        if unit is None:
            why = "not loaded" if verb == "stop" else "not found"
            result.err(f"Failed to {verb} {name}: Unit {name} {why}.\n").exit(5)
            continue
        if unit.definition is not None and machine.needs_daemon_reload(unit):
            result.err(
                f"Warning: The unit file, source configuration file or drop-ins of {name} "
                "changed on disk. Run 'systemctl daemon-reload' to reload units.\n"
            )
        if verb != "stop" and unit.load_state == "bad-setting":
            result.err(
                f"Failed to {verb} {name}: Unit {name} has a bad unit file setting.\n"
                f"See system logs and 'systemctl status {name}' for details.\n"
            ).exit(1)
            continue
        if verb == "start":
            machine.start(unit)
        elif verb == "stop":
            machine.stop(unit)
        elif verb == "try-restart":
            if unit.run is not None:
                machine.restart(unit)
        else:
            machine.restart(unit)
    return result


def _show(call: _Call) -> Result:
    result, flags = call.result, call.flags
    chosen = [p for p in call.properties if p]
    value_only = "--value" in flags
    for n, raw in enumerate(call.names):
        name = call.resolve(raw)
        unit = call.machine.lookup_unit(name)
        if n:
            result.out("\n")
        for key, value in unit_properties(call.machine, name, unit):
            if chosen and key not in chosen:
                continue
            if not chosen and value == "" and "--all" not in flags:
                continue
            result.out(f"{value}\n" if value_only else f"{key}={value}\n")
    if not call.names:
        manager = [("Version", "255.4-1ubuntu8.11"), ("Architecture", "x86-64")]
        for key, value in manager:
            if not chosen or key in chosen:
                result.out(f"{value}\n" if value_only else f"{key}={value}\n")
    return result


def _is_state(call: _Call) -> Result:
    """is-active and is-failed: each unit's state, and whether any is in the one asked about."""
    result, verb = call.result, call.verb
    if not call.names:
        return result.err("Too few arguments.\n").exit(1)
    hit = False
    for raw in call.names:
        name = call.resolve(raw)
        unit = call.machine.lookup_unit(name)
        state = unit.active_state if unit else "inactive"
        hit = hit or state == ("active" if verb == "is-active" else "failed")
        if "--quiet" not in call.flags:
            result.out(state + "\n")
    return result.exit(0 if hit else (3 if verb == "is-active" else 1))


def _cat(call: _Call) -> Result:
    """Each unit's fragment and drop-ins, the files systemd loaded, as they are on disk now:
    `# <path>` before each file, an empty line before each header but the first."""
    result, machine = call.result, call.machine
    if not call.names:
        return result.err("Too few arguments.\n").exit(1)
    printed = False
    for raw in call.names:
        name = call.resolve(raw)
        unit = machine.lookup_unit(name)
        if unit is None or unit.definition is None:
            result.err(f"No files found for {name}.\n").exit(1)
            continue
        if machine.needs_daemon_reload(unit):
            result.err(
                f"# Warning: {name} changed on disk, the version systemd has loaded is outdated.\n"
                "# This output shows the current version of the unit's original fragment and "
                "drop-in files.\n"
                "# If fragments or drop-ins were added or removed, they are not properly "
                "reflected in this output.\n"
                "# Run 'systemctl daemon-reload' to reload units.\n"
            )
        paths = [unit.fragment_path, *(p for p, _ in unit.definition.dropins)]
        for path in paths:
            text = machine.unit_files.get(path)
            if text is None:
                continue  # gone since it was loaded
            result.out(f"{chr(10) if printed else ''}# {path}\n{text}")
            printed = True
    return result


def _status(call: _Call) -> Result:
    names = [call.resolve(n) for n in call.names]
    machine, result = call.machine, call.result
    if not names:
        return result.out(
            f"● {machine.name}\n    State: running\n    Units: 312 loaded (incl. loaded aliases)\n"
        )
    status = 0
    for n, name in enumerate(names):
        unit = machine.lookup_unit(name)
        if unit is None:
            result.err(f"Unit {name} could not be found.\n")
            status = 4
            continue
        if n:
            result.out("\n")
        status = max(status, _unit_status(machine, name, unit, result))
    return result.exit(status)


def _unit_status(machine: Machine, name: str, unit: Unit, result: Result) -> int:
    """One unit's block of `systemctl status`; its exit status (3: not active)."""
    desc = unit.definition.description if unit.definition else ""
    dot = {"active": "●", "failed": "\u00d7"}.get(unit.active_state, "○")
    result.out(f"{dot} {name}" + (f" - {desc}" if desc else "") + "\n")
    result.out(f"     Loaded: {unit.load_state} ({unit.fragment_path}; enabled; preset: enabled)\n")
    result.out("".join(line + "\n" for line in dropin_lines(unit)))
    status = _active_line(machine, unit, result)
    if unit.run is not None and unit.definition is not None:
        result.out("".join(line + "\n" for line in resource_lines(machine, unit.run)))
        result.out(f"     CGroup: /system.slice/{name}\n")
        cmd = " ".join(unit.run.argv or unit.definition.exec_start)
        result.out(f"             └─{unit.run.pid} /opt/vllm/.venv/bin/python3 {cmd}\n"[:200])
        if not result.chunks[-1][1].endswith("\n"):
            result.out("\n")
    entries = machine.journal_lines([name], 10)
    if entries:
        result.out("\n")
        for entry in entries:
            result.out(short_line(machine, entry) + "\n")
    return status


def _active_line(machine: Machine, unit: Unit, result: Result) -> int:
    """The `Active:` line (and the main PID while active); 3 when the unit is not active."""
    now = machine.wall()
    if unit.active_state == "active" and unit.active_enter_wall:
        since = systemd_timestamp(unit.active_enter_wall)
        ago = _ago(now - unit.active_enter_wall)
        result.out(f"     Active: active ({unit.sub_state}) since {since}; {ago}\n")
        result.out(f"   Main PID: {unit.main_pid} (vllm)\n")
        return 0
    if unit.active_state == "failed":
        stamp = systemd_timestamp(unit.active_exit_wall)
        result.out(
            f"     Active: failed (Result: {unit.result}) since {stamp}; "
            f"{_ago(now - (unit.active_exit_wall or now))}\n"
        )
        return 3
    left = unit.active_exit_wall
    tail = f" since {systemd_timestamp(left)}; {_ago(now - left)}" if left else ""
    result.out(f"     Active: {unit.active_state} ({unit.sub_state}){tail}\n")
    return 3


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s ago"
    if seconds < 3600:
        return f"{seconds // 60}min {seconds % 60}s ago"
    if seconds < 86400:
        return f"{seconds // 3600}h {seconds % 3600 // 60}min ago"
    days = seconds // 86400
    return f"{days} day{'s' if days != 1 else ''} ago"


_VERBS: dict[str, Callable[[_Call], Result | Awaitable[Result]]] = {
    "daemon-reload": _daemon_reload,
    "start": _change,
    "stop": _change,
    "restart": _change,
    "try-restart": _change,
    "reload-or-restart": _change,
    "show": _show,
    "is-active": _is_state,
    "is-failed": _is_state,
    "cat": _cat,
    "status": _status,
}
