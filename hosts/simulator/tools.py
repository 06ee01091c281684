"""The programs a simulated host offers, printing what the real tools print for these flags.

The control plane's parsers are written against this output, so each formatter mirrors the real
program for the flags in hosts/commands.py exactly (separators, units, empty values, exit
statuses) and stays plausible for nearby flags an operator might try by hand.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import posixpath
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import catalog, http, processes
from .shell import Result
from .state import DRIVER_VERSION, FAULTS, GPU_COUNT, GpuReading, systemd_timestamp

if TYPE_CHECKING:
    from .shell import Session
    from .state import Machine, Unit

ENGINE_PYTHONS = frozenset({"/opt/vllm/.venv/bin/python3", "/opt/vllm/.venv/bin/python"})
SYSTEM_PYTHON_VERSION = "Python 3.12.3"


@dataclass
class Context:
    session: Session
    as_root: bool
    line: int

    @property
    def machine(self) -> Machine:
        return self.session.machine


Tool = Callable[[Context, list[str], str], Result]


def interpreters() -> frozenset[str]:
    return ENGINE_PYTHONS | {catalog.VLLM_BINARY}


def needs_stdin(name: str, argv: list[str]) -> bool:
    """Only programs that would read stdin wait for it (the client may never send EOF)."""
    files = [a for a in argv[1:] if not a.startswith("-") or a == "-"]
    if name == "tee":
        return True
    if name in ("cat", "sha256sum"):
        return not files or "-" in files
    return False


def writable(session: Session, path: str) -> str:
    """Why a shell redirection may not write `path` ("" when it may)."""
    if posixpath.dirname(path) == catalog.UNIT_DIR and posixpath.basename(path):
        return "" if session.is_root else "Permission denied"
    return "Read-only file system"


# --- shell builtins and small programs -----------------------------------------------------


def echo(ctx: Context, argv: list[str], stdin: str) -> Result:
    args = argv[1:]
    newline, escapes = True, False
    while args and len(args[0]) > 1 and args[0][0] == "-" and set(args[0][1:]) <= set("neE"):
        newline = newline and "n" not in args[0]
        escapes = ("e" in args[0]) or (escapes and "E" not in args[0])
        args = args[1:]
    text = " ".join(args)
    if escapes:
        text = text.replace("\\n", "\n").replace("\\t", "\t").replace("\\\\", "\\")
    return Result().out(text + ("\n" if newline else ""))


def true(ctx: Context, argv: list[str], stdin: str) -> Result:
    return Result()


def false(ctx: Context, argv: list[str], stdin: str) -> Result:
    return Result(status=1)


def hostname(ctx: Context, argv: list[str], stdin: str) -> Result:
    return Result().out(ctx.machine.name + "\n")


def whoami(ctx: Context, argv: list[str], stdin: str) -> Result:
    return Result().out(("root" if ctx.as_root else ctx.session.username) + "\n")


def _read_file(machine: Machine, path: str) -> str | None:
    return machine.read_file(path)


def _is_dir(path: str) -> bool:
    return path.rstrip("/") in ("", "/etc", "/etc/systemd", catalog.UNIT_DIR, "/models")


def cat(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    files = [a for a in argv[1:] if a != "--"]
    if not files:
        return result.out(stdin)
    for path in files:
        if path == "-":
            result.out(stdin)
            continue
        text = _read_file(ctx.machine, path)
        if _is_dir(path):
            result.err(f"cat: {path}: Is a directory\n").exit(1)
        elif text is None:
            result.err(f"cat: {path}: No such file or directory\n").exit(1)
        else:
            result.out(text)
    return result


def sha256sum(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    files: list[str] = []
    ended = False
    for arg in argv[1:]:
        if not ended and arg == "--":
            ended = True
        elif not ended and arg.startswith("-") and arg != "-":
            if arg in ("-b", "--binary", "-t", "--text"):
                continue
            return result.err(
                f"sha256sum: unrecognized option '{arg}'\n"
                "Try 'sha256sum --help' for more information.\n"
            ).exit(1)
        else:
            files.append(arg)
    for path in files or ["-"]:
        text = stdin if path == "-" else _read_file(ctx.machine, path)
        if path != "-" and _is_dir(path):
            result.err(f"sha256sum: {path}: Is a directory\n").exit(1)
            continue
        if text is None:
            result.err(f"sha256sum: {path}: No such file or directory\n").exit(1)
            continue
        digest = hashlib.sha256(text.encode()).hexdigest()
        if "\\" in path or "\n" in path:
            shown = path.replace("\\", "\\\\").replace("\n", "\\n")
            result.out(f"\\{digest}  {shown}\n")
        else:
            result.out(f"{digest}  {path}\n")
    return result


def tee(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    append = False
    files: list[str] = []
    ended = False
    for arg in argv[1:]:
        if not ended and arg == "--":
            ended = True
        elif not ended and arg in ("-a", "--append"):
            append = True
        elif not ended and arg.startswith("-") and arg != "-":
            return result.err(
                f"tee: unrecognized option '{arg}'\nTry 'tee --help' for more information.\n"
            ).exit(1)
        else:
            files.append(arg)
    result.out(stdin)
    machine = ctx.machine
    for path in files:
        if path in ("/dev/null", "-"):
            continue
        if path in ("/dev/stdout", "/dev/stderr"):
            result.chunks.append((1 if path == "/dev/stdout" else 2, stdin))
            continue
        if posixpath.dirname(path) == catalog.UNIT_DIR and posixpath.basename(path):
            if not ctx.as_root:
                result.err(f"tee: {path}: Permission denied\n").exit(1)
                continue
            previous = machine.unit_files.get(path, "") if append else ""
            machine.write_file(path, previous + stdin)
            continue
        result.err(f"tee: {path}: Permission denied\n").exit(1)
    return result


# --- systemctl -----------------------------------------------------------------------------

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


_NEEDS_ARG = ("-p", "--property", "-t", "--type", "--state", "-n", "--lines", "-o", "--output")


def systemctl(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    properties: list[str] = []
    flags: set[str] = set()
    words: list[str] = []
    args = argv[1:]
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
            known = {
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
            if arg not in known:
                return result.err(f"systemctl: unrecognized option '{arg}'\n").exit(1)
            flags.add(arg)
        elif arg.startswith("-") and len(arg) > 1:
            for ch in arg[1:]:
                if ch not in "qalf":
                    return result.err(f"systemctl: invalid option -- '{ch}'\n").exit(1)
                flags.add({"q": "--quiet", "a": "--all", "l": "--full", "f": "--force"}[ch])
        else:
            words.append(arg)
        i += 1
    if not words:
        return result.err("Too few arguments.\n").exit(1)  # list-units would be the default
    verb, names = words[0], words[1:]
    machine = ctx.machine
    machine.tick()
    quiet = "--quiet" in flags

    def resolve(raw: str) -> str:
        name, warning = mangle_unit(raw)
        if warning and not quiet:
            result.err(warning)
        return name

    if verb == "daemon-reload":
        if not ctx.as_root:
            return result.err(
                "Failed to reload daemon: Interactive authentication required.\n"
            ).exit(1)
        machine.daemon_reload()
        return result
    if verb in ("start", "stop", "restart", "try-restart", "reload-or-restart"):
        if not names:
            return result.err("Too few arguments.\n").exit(1)
        for raw in names:
            name = resolve(raw)
            if not ctx.as_root:
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
    if verb == "show":
        chosen = [p for p in properties if p]
        value_only = "--value" in flags
        for n, raw in enumerate(names or []):
            name = resolve(raw)
            unit = machine.lookup_unit(name)
            if n:
                result.out("\n")
            for key, value in unit_properties(machine, name, unit):
                if chosen and key not in chosen:
                    continue
                if not chosen and value == "" and "--all" not in flags:
                    continue
                result.out(f"{value}\n" if value_only else f"{key}={value}\n")
        if not names:
            manager = [("Version", "255.4-1ubuntu8.11"), ("Architecture", "x86-64")]
            for key, value in manager:
                if not chosen or key in chosen:
                    result.out(f"{value}\n" if value_only else f"{key}={value}\n")
        return result
    if verb in ("is-active", "is-failed"):
        if not names:
            return result.err("Too few arguments.\n").exit(1)
        hit = False
        for raw in names:
            name = resolve(raw)
            unit = machine.lookup_unit(name)
            state = unit.active_state if unit else "inactive"
            hit = hit or state == ("active" if verb == "is-active" else "failed")
            if not quiet:
                result.out(state + "\n")
        return result.exit(0 if hit else (3 if verb == "is-active" else 1))
    if verb == "cat":
        if not names:
            return result.err("Too few arguments.\n").exit(1)
        for n, raw in enumerate(names):
            name = resolve(raw)
            path = machine.unit_path(name)
            text = machine.unit_files.get(path)
            if text is None:
                result.err(f"No files found for {name}.\n").exit(1)
                continue
            if n:
                result.out("\n")
            result.out(f"# {path}\n{text}")
        return result
    if verb == "status":
        return _status(ctx, [resolve(n) for n in names], result)
    return result.err(f"Unknown command verb '{verb}'.\n").exit(1)


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


def _status(ctx: Context, names: list[str], result: Result) -> Result:
    machine = ctx.machine
    status = 0
    if not names:
        return result.out(
            f"● {machine.name}\n    State: running\n    Units: 312 loaded (incl. loaded aliases)\n"
        )
    for n, name in enumerate(names):
        unit = machine.lookup_unit(name)
        if unit is None:
            result.err(f"Unit {name} could not be found.\n")
            status = 4
            continue
        if n:
            result.out("\n")
        desc = unit.definition.description if unit.definition else ""
        dot = {"active": "●", "failed": "\u00d7"}.get(unit.active_state, "○")
        result.out(f"{dot} {name}" + (f" - {desc}" if desc else "") + "\n")
        result.out(
            f"     Loaded: {unit.load_state} ({unit.fragment_path}; enabled; preset: enabled)\n"
        )
        now = machine.wall()
        if unit.active_state == "active" and unit.active_enter_wall:
            since = systemd_timestamp(unit.active_enter_wall)
            ago = _ago(now - unit.active_enter_wall)
            result.out(f"     Active: active ({unit.sub_state}) since {since}; {ago}\n")
            result.out(f"   Main PID: {unit.main_pid} (vllm)\n")
        elif unit.active_state == "failed":
            stamp = systemd_timestamp(unit.active_exit_wall)
            result.out(
                f"     Active: failed (Result: {unit.result}) since {stamp}; "
                f"{_ago(now - (unit.active_exit_wall or now))}\n"
            )
            status = max(status, 3)
        else:
            left = unit.active_exit_wall
            tail = f" since {systemd_timestamp(left)}; {_ago(now - left)}" if left else ""
            result.out(f"     Active: {unit.active_state} ({unit.sub_state}){tail}\n")
            status = max(status, 3)
        if unit.run is not None and unit.definition is not None:
            result.out(f"     CGroup: /system.slice/{name}\n")
            cmd = " ".join(unit.definition.exec_start)
            result.out(f"             └─{unit.run.pid} /opt/vllm/.venv/bin/python3 {cmd}\n"[:200])
            if not result.chunks[-1][1].endswith("\n"):
                result.out("\n")
        entries = machine.journal_lines([name], 10)
        if entries:
            result.out("\n")
            for entry in entries:
                result.out(_short_line(machine, entry) + "\n")
    return result.exit(status)


# --- journalctl ----------------------------------------------------------------------------


def _short_line(machine: Machine, entry: object) -> str:
    from .state import JournalEntry

    assert isinstance(entry, JournalEntry)
    stamp = dt.datetime.fromtimestamp(entry.wall, dt.UTC).strftime("%b %d %H:%M:%S")
    return f"{stamp} {machine.name} {entry.ident}[{entry.pid}]: {entry.message}"


def journalctl(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    units: list[str] = []
    count: int | None = None
    output = "short"
    reverse = False
    args = argv[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        if arg in ("-u", "--unit"):
            if nxt is None:
                return result.err(f"journalctl: option '{arg}' requires an argument\n").exit(1)
            units.append(mangle_unit(nxt)[0])
            i += 1
        elif arg.startswith("--unit="):
            units.append(mangle_unit(arg.split("=", 1)[1])[0])
        elif arg.startswith("-u") and len(arg) > 2:
            units.append(mangle_unit(arg[2:])[0])
        elif arg in ("-n", "--lines"):
            count = 10
            if nxt is not None and nxt.lstrip("+").isdigit():
                count = int(nxt.lstrip("+"))
                i += 1
            elif nxt == "all":
                count = None
                i += 1
        elif arg.startswith("--lines=") or (arg.startswith("-n") and len(arg) > 2):
            value = arg.split("=", 1)[1] if arg.startswith("--lines=") else arg[2:]
            if value == "all":
                count = None
            elif value.lstrip("+").isdigit():
                count = int(value.lstrip("+"))
            else:
                return result.err(f"Failed to parse lines '{value}'.\n").exit(1)
        elif arg in ("-o", "--output"):
            output = nxt or ""
            i += 1
        elif arg.startswith("--output="):
            output = arg.split("=", 1)[1]
        elif arg.startswith("-o") and len(arg) > 2:
            output = arg[2:]
        elif arg in ("-r", "--reverse"):
            reverse = True
        elif arg in ("-f", "--follow"):
            return result.err(
                "journalctl: --follow is not available on this simulated host\n"
            ).exit(1)
        elif arg in ("--no-pager", "-q", "--quiet", "-b", "--boot", "--no-hostname", "-x", "-a"):
            pass
        elif arg == "-e" or arg == "--pager-end":
            count = count if count is not None else 1000
        else:
            return result.err(f"journalctl: unrecognized option '{arg}'\n").exit(1)
        i += 1
    if output not in ("short", "cat", "short-iso", "short-precise", "with-unit"):
        return result.err(f"Unknown output format '{output}'.\n").exit(1)
    entries = ctx.machine.journal_lines(units or None, count)
    if reverse:
        entries.reverse()
    if not entries:
        return result.out("-- No entries --\n")
    machine = ctx.machine
    for entry in entries:
        if output == "cat":
            result.out(entry.message + "\n")
        elif output == "short-iso":
            stamp = dt.datetime.fromtimestamp(entry.wall, dt.UTC).strftime(
                "%Y-%m-%dT%H:%M:%S+00:00"
            )
            result.out(f"{stamp} {machine.name} {entry.ident}[{entry.pid}]: {entry.message}\n")
        else:
            result.out(_short_line(machine, entry) + "\n")
    return result


# --- nvidia-smi ----------------------------------------------------------------------------

DRIVER_ERROR = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    "that the latest NVIDIA driver is installed and running.\n\n"
)


def _bus_id(index: int) -> str:
    return f"00000000:{[0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB][index % 8]:02X}:00.0"


def _gpu_field(name: str) -> tuple[str, Callable[[GpuReading, bool], str]] | None:
    def unit(value: str, suffix: str, nounits: bool) -> str:
        return value if nounits else f"{value} {suffix}"

    fields: dict[str, tuple[str, Callable[[GpuReading, bool], str]]] = {
        "index": ("index", lambda r, nu: str(r.index)),
        "uuid": ("uuid", lambda r, nu: r.uuid),
        "gpu_uuid": ("uuid", lambda r, nu: r.uuid),
        "name": ("name", lambda r, nu: r.name),
        "gpu_name": ("name", lambda r, nu: r.name),
        "count": ("count", lambda r, nu: str(GPU_COUNT)),
        "driver_version": ("driver_version", lambda r, nu: DRIVER_VERSION),
        "pci.bus_id": ("pci.bus_id", lambda r, nu: _bus_id(r.index)),
        "gpu_bus_id": ("pci.bus_id", lambda r, nu: _bus_id(r.index)),
        "pstate": ("pstate", lambda r, nu: r.pstate),
        "fan.speed": ("fan.speed [%]", lambda r, nu: "[N/A]"),
        "memory.total": (
            "memory.total [MiB]",
            lambda r, nu: unit(str(r.memory_total_mib), "MiB", nu),
        ),
        "memory.used": ("memory.used [MiB]", lambda r, nu: unit(str(r.memory_used_mib), "MiB", nu)),
        "memory.free": (
            "memory.free [MiB]",
            lambda r, nu: unit(
                str(max(0, r.memory_total_mib - r.memory_used_mib - 335)), "MiB", nu
            ),
        ),
        "power.draw": ("power.draw [W]", lambda r, nu: unit(f"{r.power_draw_w:.2f}", "W", nu)),
        "power.limit": ("power.limit [W]", lambda r, nu: unit(f"{r.power_limit_w:.2f}", "W", nu)),
        "utilization.gpu": (
            "utilization.gpu [%]",
            lambda r, nu: unit(str(r.utilization_pct), "%", nu),
        ),
        "utilization.memory": (
            "utilization.memory [%]",
            lambda r, nu: unit(str(r.utilization_pct // 3), "%", nu),
        ),
        "temperature.gpu": ("temperature.gpu", lambda r, nu: str(r.temperature_c)),
    }
    return fields.get(name)


_APP_FIELDS = {
    "pid": "pid",
    "process_name": "process_name",
    "name": "process_name",
    "used_memory": "used_gpu_memory [MiB]",
    "used_gpu_memory": "used_gpu_memory [MiB]",
    "gpu_uuid": "gpu_uuid",
    "gpu_bus_id": "gpu_bus_id",
    "gpu_name": "gpu_name",
}


def nvidia_smi(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    machine = ctx.machine
    if "gpu_driver_error" in machine.faults:
        return result.out(DRIVER_ERROR).exit(9)
    query_gpu: list[str] | None = None
    query_apps: list[str] | None = None
    fmt: list[str] | None = None
    ids: set[int] | None = None
    list_gpus = False
    args = argv[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        key, _, value = arg.partition("=")
        if key in ("--query-gpu", "--query-compute-apps", "--format", "-i", "--id") and not _:
            value = args[i + 1] if i + 1 < len(args) else ""
            i += 1
        if key == "--query-gpu":
            query_gpu = [f.strip() for f in value.split(",") if f.strip()]
        elif key == "--query-compute-apps":
            query_apps = [f.strip() for f in value.split(",") if f.strip()]
        elif key == "--format":
            fmt = [f.strip() for f in value.split(",")]
        elif key in ("-i", "--id"):
            try:
                ids = {int(v) for v in value.split(",")}
            except ValueError:
                return result.out(f"Invalid GPU ID: {value}\n").exit(2)
        elif key in ("-L", "--list-gpus"):
            list_gpus = True
        else:
            return result.out(
                "\nInvalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n"
                if key.startswith("-")
                else f"\nInvalid argument: {arg}\n"
            ).exit(2)
        i += 1
    readings = [r for r in machine.gpu_readings() if ids is None or r.index in ids]
    if ids is not None and any(g >= GPU_COUNT or g < 0 for g in ids):
        bad = min(g for g in ids if g >= GPU_COUNT or g < 0)
        return result.out(f"No devices were found matching the provided id: {bad}\n").exit(6)
    if list_gpus:
        for r in readings:
            result.out(f"GPU {r.index}: {r.name} (UUID: {r.uuid})\n")
        return result
    if query_gpu is not None or query_apps is not None:
        if fmt is None or "csv" not in fmt:
            return result.out(
                "\nInvalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n"
            ).exit(2)
        noheader, nounits = "noheader" in fmt, "nounits" in fmt
        if query_gpu is not None:
            columns = []
            for name in query_gpu:
                found = _gpu_field(name)
                if found is None:
                    return result.out(f'Field "{name}" is not a valid field to query.\n\n').exit(2)
                columns.append(found)
            if not noheader:
                result.out(", ".join(h for h, _f in columns) + "\n")
            for r in readings:
                result.out(", ".join(f(r, nounits) for _h, f in columns) + "\n")
            return result
        assert query_apps is not None
        for name in query_apps:
            if name not in _APP_FIELDS:
                return result.out(f'Field "{name}" is not a valid field to query.\n\n').exit(2)
        if not noheader:
            result.out(", ".join(_APP_FIELDS[n] for n in query_apps) + "\n")
        gpus = {r.index: r for r in machine.gpu_readings()}
        for app in machine.compute_apps():
            if ids is not None and app.gpu_index not in ids:
                continue
            values = {
                "pid": str(app.pid),
                "process_name": app.process_name,
                "name": app.process_name,
                "used_memory": str(app.used_memory_mib)
                if nounits
                else f"{app.used_memory_mib} MiB",
                "gpu_uuid": app.gpu_uuid,
                "gpu_bus_id": _bus_id(app.gpu_index),
                "gpu_name": gpus[app.gpu_index].name,
            }
            values["used_gpu_memory"] = values["used_memory"]
            result.out(", ".join(values[n] for n in query_apps) + "\n")
        return result
    return result.out(_smi_table(machine, readings))


def _cells(a: str, b: str, c: str) -> str:
    return f"|{a:<41}|{b:<24}|{c:<22}|"


def _wide(text: str) -> str:
    return f"|{text:<89}|"


def _smi_table(machine: Machine, readings: list[GpuReading]) -> str:
    """The default nvidia-smi screen, for people who type it by hand."""
    now = dt.datetime.fromtimestamp(machine.wall(), dt.UTC).strftime("%a %b %d %H:%M:%S %Y")
    bar = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    full = "+" + "-" * 89 + "+"
    lines = [
        f"{now}       ",
        full,
        _wide(
            f" NVIDIA-SMI {DRIVER_VERSION:<22} Driver Version: {DRIVER_VERSION:<14} "
            "CUDA Version: 13.0"
        ),
        bar,
        _cells(
            " GPU  Name                 Persistence-M",
            " Bus-Id          Disp.A",
            " Volatile Uncorr. ECC",
        ),
        _cells(
            " Fan  Temp   Perf          Pwr:Usage/Cap",
            "           Memory-Usage",
            " GPU-Util  Compute M.",
        ),
        _cells("", "", "               MIG M."),
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]
    for r in readings:
        name = r.name[:23] + "..." if len(r.name) > 26 else r.name
        power = f"{round(r.power_draw_w)}W /  {round(r.power_limit_w)}W"
        memory = f"{r.memory_used_mib}MiB /  {r.memory_total_mib}MiB"
        util = f"{r.utilization_pct}%"
        lines += [
            _cells(f" {r.index:>3}  {name:<26}     On", f"   {_bus_id(r.index)} Off", f"{'0':>21}"),
            _cells(
                f" N/A   {r.temperature_c}C    {r.pstate:<3}{power:>23} ",
                f"{memory:>23}",
                f"{util:>8}      Default",
            ),
            _cells("", "", "             Disabled"),
            bar,
        ]
    lines += [
        "",
        full,
        _wide(" Processes:"),
        _wide("  GPU   GI   CI              PID   Type   Process name" + " " * 24 + "GPU Memory"),
        _wide(
            "        ID   ID                                                               Usage"
        ),
        "|" + "=" * 89 + "|",
    ]
    apps = machine.compute_apps()
    if not apps:
        lines.append(_wide("  No running processes found"))
    for app in apps:
        mem = f"{app.used_memory_mib}MiB"
        lines.append(
            _wide(
                f"  {app.gpu_index:>3}   N/A  N/A  {app.pid:>14}      C   {app.process_name:<33}"
                f"{mem:>13}"
            )
        )
    lines.append(full)
    return "\n".join(lines) + "\n"


# --- ps ------------------------------------------------------------------------------------

# procps-ng 4's column for each field the simulated ps knows: (header, width, right-aligned).
_PS_FIELDS = {
    "pid": ("PID", processes.PID_WIDTH, True),
    "unit": ("UNIT", processes.UNIT_WIDTH, False),
    "comm": ("COMMAND", processes.COMM_WIDTH, False),
    "ucmd": ("CMD", processes.COMM_WIDTH, False),
    "ucomm": ("COMMAND", processes.COMM_WIDTH, False),
}
PS_USAGE = (
    "\n"
    "Usage:\n"
    " ps [options]\n"
    "\n"
    " Try 'ps --help <simple|list|output|threads|misc|all>'\n"
    "  or 'ps --help <s|l|o|t|m|a>'\n"
    " for additional help text.\n"
    "\n"
    "For more details see ps(1).\n"
)


def _ps_error(message: str) -> Result:
    return Result().err(f"error: {message}\n{PS_USAGE}").exit(1)


def _ps_format(spec: str) -> list[tuple[str, str]] | str:
    """procps's format_parse: `pid=,unit=` is two columns with empty headers (an error: str)."""
    items = [item for item in re.split(r"[ ,\t\n]", spec)]
    if items and items[-1] == "" and len(items) > 1:
        items.pop()  # one trailing delimiter is allowed
    if not any(items):
        return "empty format list"
    if "" in items:
        return "improper format list"
    columns = []
    for item in items:
        name, eq, header = item.partition("=")
        if name not in _PS_FIELDS:
            return f'unknown user-defined format specifier "{name}"'
        columns.append((name, header if eq else _PS_FIELDS[name][0]))
    return columns


def ps(ctx: Context, argv: list[str], stdin: str) -> Result:
    """procps-ng's ps for `-e`/`-A` with `-o` columns from pid, unit and comm."""
    every = False
    specs: list[str] = []
    args = argv[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name != "--format":
                return _ps_error("unknown gnu long option")
            if not eq:
                if i + 1 >= len(args):
                    return _ps_error("format specification must follow --format")
                i += 1
                value = args[i]
            specs.append(value)
        elif arg.startswith("-") and len(arg) > 1:
            j = 1
            while j < len(arg):
                flag = arg[j]
                if flag in "eA":
                    every = True
                elif flag == "o":
                    value = arg[j + 1 :]
                    if not value:
                        if i + 1 >= len(args):
                            return _ps_error("format specification must follow -o")
                        i += 1
                        value = args[i]
                    specs.append(value)
                    break
                else:
                    return _ps_error("unsupported SysV option")
                j += 1
        else:
            return _ps_error("unsupported option (BSD syntax)")
        i += 1
    if not every or not specs:
        # The real ps has a default selection and format; the simulated host only has these.
        return _ps_error("this simulated ps supports only -e (or -A) with -o pid,unit,comm")
    columns: list[tuple[str, str]] = []
    for spec in specs:
        parsed = _ps_format(spec)
        if isinstance(parsed, str):
            return _ps_error(parsed)
        columns += parsed
    login = ctx.session.ensure_login()
    table = ctx.machine.processes(login, own_pid=ctx.machine.take_pid())
    rows: list[list[str]] = [[h for _n, h in columns]] if any(h for _n, h in columns) else []
    for proc in table:
        values = {"pid": str(proc.pid), "unit": proc.unit or "-"}
        values["comm"] = values["ucmd"] = values["ucomm"] = proc.comm
        rows.append([values[name] for name, _h in columns])
    result = Result()
    for row in rows:
        cells = []
        for n, ((name, header), value) in enumerate(zip(columns, row, strict=True)):
            _default, width, right = _PS_FIELDS[name]
            width = max(width, len(header))
            if right:
                cells.append(value.rjust(width))
            elif n == len(columns) - 1:
                cells.append(value)  # the last column is not padded
            else:
                cells.append(value.ljust(width))
        result.out(" ".join(cells) + "\n")
    return result


# --- curl ----------------------------------------------------------------------------------

_CURL_VALUE_SHORT = set("mwHdXoAeu")
_CURL_VALUE_LONG = {
    "--max-time": "m",
    "--write-out": "w",
    "--header": "H",
    "--data": "d",
    "--data-binary": "d",
    "--data-raw": "d",
    "--data-ascii": "d",
    "--json": "json",
    "--request": "X",
    "--output": "o",
    "--connect-timeout": "connect-timeout",
    "--user-agent": "A",
}
_CURL_FLAG_LONG = {
    "--silent": "s",
    "--show-error": "S",
    "--fail": "f",
    "--include": "i",
    "--location": "L",
    "--insecure": "k",
    "--verbose": "v",
    "--compressed": "compressed",
    "--no-progress-meter": "s",
}


def curl(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    flags: set[str] = set()
    values: dict[str, list[str]] = {}
    urls: list[str] = []
    args = argv[1:]
    i = 0
    usage_hint = "curl: try 'curl --help' or 'curl --manual' for more information\n"
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            key, eq, inline = arg.partition("=")
            if key in _CURL_VALUE_LONG:
                if eq:
                    value = inline
                elif i + 1 < len(args):
                    value = args[i + 1]
                    i += 1
                else:
                    return result.err(f"curl: option {key}: requires parameter\n{usage_hint}").exit(
                        2
                    )
                values.setdefault(_CURL_VALUE_LONG[key], []).append(value)
            elif key in _CURL_FLAG_LONG:
                flags.add(_CURL_FLAG_LONG[key])
            elif key == "--url" and i + 1 < len(args):
                urls.append(args[i + 1])
                i += 1
            else:
                return result.err(f"curl: option {key}: is unknown\n{usage_hint}").exit(2)
        elif arg.startswith("-") and len(arg) > 1:
            j = 1
            while j < len(arg):
                ch = arg[j]
                if ch in _CURL_VALUE_SHORT:
                    if j + 1 < len(arg):
                        value = arg[j + 1 :]
                    elif i + 1 < len(args):
                        value = args[i + 1]
                        i += 1
                    else:
                        return result.err(
                            f"curl: option -{ch}: requires parameter\n{usage_hint}"
                        ).exit(2)
                    values.setdefault(ch, []).append(value)
                    break
                if ch not in "sSfiLkv":
                    return result.err(f"curl: option -{ch}: is unknown\n{usage_hint}").exit(2)
                flags.add(ch)
                j += 1
        else:
            urls.append(arg)
        i += 1
    if not urls:
        return result.err(f"curl: no URL specified\n{usage_hint}").exit(2)
    show_error = "S" in flags or "s" not in flags
    data = values.get("d") or values.get("json")
    method = (values.get("X") or ["POST" if data else "GET"])[-1]
    body = "&".join(data) if data else None
    if data and body is not None and body.startswith("@"):
        return result.err("curl: (26) Failed to open/read local data from file/application\n").exit(
            26
        )
    headers = {}
    for header in values.get("H", []):
        name, _, value = header.partition(":")
        headers[name.strip().lower()] = value.strip()
    writeout = (values.get("w") or [""])[-1]
    output_null = (values.get("o") or [""])[-1] == "/dev/null"
    status = 0
    for url in urls:
        response, error, code = http.request(ctx.machine, method, url, headers, body)
        if error:
            status = code
            if show_error:
                result.err(f"curl: ({code}) {error}\n")
            http_code = "000"
        else:
            assert response is not None
            http_code = f"{response.status:03d}"
            if "f" in flags and response.status >= 400:
                status = 22
                if show_error:
                    result.err(f"curl: (22) The requested URL returned error: {response.status}\n")
            else:
                if "i" in flags:
                    result.out(response.head())
                if not output_null:
                    result.out(response.body)
        if writeout:
            result.out(_write_out(writeout, http_code, url, status, result))
    return result.exit(status)


def _write_out(fmt: str, http_code: str, url: str, exit_code: int, result: Result) -> str:
    variables = {
        "http_code": http_code,
        "response_code": http_code,
        "url_effective": url,
        "url": url,
        "exitcode": str(exit_code),
        "time_total": "0.001843",
        "time_connect": "0.000112",
        "size_download": "0",
    }
    out = []
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch == "\\" and i + 1 < len(fmt):
            nxt = fmt[i + 1]
            out.append({"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}.get(nxt, "\\" + nxt))
            i += 2
        elif ch == "%" and fmt.startswith("%%", i):
            out.append("%")
            i += 2
        elif ch == "%" and fmt.startswith("%{", i) and "}" in fmt[i:]:
            end = fmt.index("}", i)
            name = fmt[i + 2 : end]
            if name in variables:
                out.append(variables[name])
            else:
                result.err(f"curl: unknown --write-out variable: '{name}'\n")
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


# --- python --------------------------------------------------------------------------------


def python(ctx: Context, argv: list[str], stdin: str) -> Result:
    """The engine's interpreter runs the integrity script and nothing else: no code is run."""
    result = Result()
    interpreter = argv[0]
    if interpreter == catalog.VLLM_BINARY or interpreter == "vllm":
        if argv[1:] in (["--version"], ["-v"]):
            return result.out(catalog.VLLM_VERSION + "\n")
        return result.err(
            "vllm: this simulated host runs vLLM only through its systemd units\n"
        ).exit(1)
    engine = interpreter in ENGINE_PYTHONS
    args = argv[1:]
    script: str | None = None
    script_args: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-V", "--version"):
            return result.out(SYSTEM_PYTHON_VERSION + "\n")
        if arg == "-c":
            if i + 1 >= len(args):
                return result.err(
                    "Argument expected for the -c option\n"
                    f"usage: {interpreter} [option] ... [-c cmd | -m mod | file | -] [arg] ...\n"
                    "Try `python -h' for more information.\n"
                ).exit(2)
            script = args[i + 1]
            script_args = args[i + 2 :]
            break
        if arg.startswith("-") and len(arg) > 1 and set(arg[1:]) <= set("IEsSBuq"):
            i += 1
            continue
        break
    if script is None or "metadata.distribution" not in script:
        return result.err(
            f"{interpreter}: this simulated host only runs the control plane's integrity check\n"
        ).exit(1)
    if not script_args:
        return result.err(
            "Traceback (most recent call last):\n"
            '  File "<string>", line 4, in <module>\n'
            "IndexError: list index out of range\n"
        ).exit(1)
    dist = script_args[0]
    report = ctx.machine.integrity(dist) if engine else None
    if report is None:
        return result.out(
            json.dumps({"error": "distribution not installed", "dist": dist}) + "\n"
        ).exit(3)
    return result.out(json.dumps(report) + "\n")


# --- simctl: the simulator's own switchboard, for demos over plain ssh ----------------------

SIMCTL_USAGE = (
    "usage: simctl status\n"
    "       simctl fault NAME on|off      (faults: " + ", ".join(FAULTS) + ")\n"
    "       simctl inflight RUNNING [WAITING]\n"
    "       simctl load-seconds SECONDS\n"
)


def simctl(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    machine = ctx.machine
    args = argv[1:]
    if not args or args[0] in ("-h", "--help", "help"):
        return result.out(SIMCTL_USAGE).exit(0 if args else 2)
    verb = args[0]
    if verb == "status" and len(args) == 1:
        return result.out(json.dumps(machine.snapshot(), indent=2) + "\n")
    if verb == "faults" and len(args) == 1:
        for fault in FAULTS:
            result.out(f"{fault}: {'on' if fault in machine.faults else 'off'}\n")
        return result
    if verb == "fault" and len(args) == 3 and args[2] in ("on", "off"):
        fault, on = args[1], args[2] == "on"
        if fault not in FAULTS:
            return result.err(f"simctl: unknown fault {fault!r}\n{SIMCTL_USAGE}").exit(2)
        machine.set_fault(fault, on)
        if ctx.session.on_fault_change is not None:
            ctx.session.on_fault_change(fault, on)
        return result.out(f"{machine.name}: fault {fault} {'on' if on else 'off'}\n")
    if verb == "inflight" and len(args) in (2, 3):
        try:
            running, waiting = int(args[1]), int(args[2]) if len(args) == 3 else 0
        except ValueError:
            return result.err(SIMCTL_USAGE).exit(2)
        machine.set_inflight(running, waiting)
        return result.out(f"{machine.name}: running {running}, waiting {waiting}\n")
    if verb == "load-seconds" and len(args) == 2:
        try:
            machine.load_seconds = max(0.0, float(args[1]))
        except ValueError:
            return result.err(SIMCTL_USAGE).exit(2)
        return result.out(f"{machine.name}: load takes {machine.load_seconds:g} s\n")
    return result.err(SIMCTL_USAGE).exit(2)


COMMANDS: dict[str, Tool] = {
    "echo": echo,
    "true": true,
    ":": true,
    "false": false,
    "hostname": hostname,
    "whoami": whoami,
    "cat": cat,
    "sha256sum": sha256sum,
    "tee": tee,
    "systemctl": systemctl,
    "journalctl": journalctl,
    "nvidia-smi": nvidia_smi,
    "curl": curl,
    "ps": ps,
    "python3": python,
    "python": python,
    "simctl": simctl,
}
