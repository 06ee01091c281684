"""Reading a unit the way systemd does: the fragment, then its drop-ins, the keys it acts on.

Drop-ins (`<unit>.d/*.conf`) are read after the fragment in file name order, and each
assignment goes on where the fragment left off: a single-valued key (Description=, Restart=)
takes the last value, a list (ExecStart=, Environment=, EnvironmentFile=) grows, and an empty
assignment (`ExecStart=`) empties the list first. A simple service with more than one
ExecStart= is refused, as systemd refuses it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from ..vllm_cli import parse_vllm_argv
from .environment import needs_expansion
from .units import UnitDefinition

# (section, key) -> every value given, in order (most keys take the last; some add up).
_Values = dict[tuple[str, str], list[str]]
_ONESHOT_ONLY = (
    "Service has more than one ExecStart= setting, which is only allowed for Type=oneshot "
    "services. Refusing."
)


def parse_unit_file(
    text: str, dropins: Sequence[tuple[str, str]] = (), fragment_path: str = ""
) -> UnitDefinition:
    """Read the [Unit]/[Service] keys systemd would act on; other keys are ignored.

    `dropins` are (path, text) in the order systemd applies them.
    """
    values = _values(_logical_lines(text))
    for _path, dropin in dropins:
        for key, found in _values(_logical_lines(dropin)).items():
            values.setdefault(key, []).extend(found)

    def last(sec: str, key: str, default: str = "") -> str:
        found = values.get((sec, key))
        return found[-1] if found else default

    argv, bad = _exec_start(values, last("Service", "Type", "simple"))
    try:
        restart_sec = float(last("Service", "RestartSec", "0.1").rstrip("s") or 0.1)
    except ValueError:
        restart_sec = 0.1
    stop = last("Service", "TimeoutStopSec") or last("Service", "TimeoutSec")
    return UnitDefinition(
        text=text,
        dropins=tuple(dropins),
        fragment_path=fragment_path,
        description=last("Unit", "Description"),
        exec_start=argv,
        environment=_environment(_list(values, "Environment")),
        environment_files=tuple(
            (v.removeprefix("-"), v.startswith("-")) for v in _list(values, "EnvironmentFile")
        ),
        restart=last("Service", "Restart", "no"),
        restart_sec=restart_sec,
        timeout_stop_sec=_seconds(stop, 90.0),
        bad_setting=bad,
        # With variables in it the command line is only known when the process starts.
        engine=parse_vllm_argv(argv) if argv and not needs_expansion(argv) else None,
    )


_TIME_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "ms": 0.001}


def _seconds(value: str, default: float) -> float:
    """A systemd time span (`90`, `90s`, `1min 30s`, `infinity`) in seconds; `default` for
    what systemd would reject (it keeps its default then, and logs it)."""
    value = value.strip()
    if not value:
        return default
    if value == "infinity" or re.fullmatch(r"0+(?:\.0+)?\s*[a-z]*", value):
        return float("inf")  # 0 turns the timeout off, as infinity does
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        if unit not in _TIME_UNITS:
            return default
        total += float(number) * _TIME_UNITS[unit]
    return total if re.fullmatch(r"(\s*\d+(?:\.\d+)?\s*[a-z]*)+", value) else default


def _logical_lines(text: str) -> list[str]:
    """The file's lines with backslash continuations joined."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _values(lines: list[str]) -> _Values:
    section = ""
    values: _Values = {}
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            continue
        if "=" in stripped:
            key, value = stripped.split("=", 1)
            values.setdefault((section, key.strip()), []).append(value.strip())
    return values


def _list(values: _Values, key: str) -> list[str]:
    """A list setting of [Service]: each value adds to it, an empty one empties it."""
    items: list[str] = []
    for value in values.get(("Service", key), []):
        if value:
            items.append(value)
        else:
            items.clear()
    return items


def _environment(entries: list[str]) -> tuple[tuple[str, str], ...]:
    """Every Environment= line's assignments, in order (a line that does not split is skipped)."""
    environment: list[tuple[str, str]] = []
    for entry in entries:
        try:
            words = shlex.split(entry)
        except ValueError:
            words = []
        for word in words:
            if "=" in word:
                key, value = word.split("=", 1)
                environment.append((key, value))
    return tuple(environment)


def _exec_start(values: _Values, service_type: str) -> tuple[tuple[str, ...], str | None]:
    """ExecStart='s argv (its words, not yet expanded), and why systemd refuses the unit
    (None: it does not)."""
    exec_lines = _list(values, "ExecStart")
    if not exec_lines:
        return (), "Service has no ExecStart=, ExecStop=, or SuccessAction=. Refusing."
    if len(exec_lines) > 1 and service_type != "oneshot":
        return (), _ONESHOT_ONLY
    bad = None
    argv: tuple[str, ...] = ()
    command = exec_lines[-1].lstrip("-@:+!")
    try:
        argv = tuple(shlex.split(command))
    except ValueError:
        bad = f"Invalid command line, ignoring: {command}"
    if argv and not argv[0].startswith("/"):
        argv = (f"/usr/bin/{argv[0]}", *argv[1:])
    return argv, bad
