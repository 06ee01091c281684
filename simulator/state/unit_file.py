"""Reading a unit file the way systemd does: the [Unit]/[Service] keys it acts on."""

from __future__ import annotations

import shlex

from ..vllm_cli import parse_vllm_argv
from .units import UnitDefinition

# (section, key) -> every value given, in order (most keys take the last; some add up).
_Values = dict[tuple[str, str], list[str]]


def parse_unit_file(text: str) -> UnitDefinition:
    """Read the [Unit]/[Service] keys systemd would act on; other keys are ignored."""
    values = _values(_logical_lines(text))

    def last(sec: str, key: str, default: str = "") -> str:
        found = values.get((sec, key))
        return found[-1] if found else default

    argv, bad = _exec_start(values)
    try:
        restart_sec = float(last("Service", "RestartSec", "0.1").rstrip("s") or 0.1)
    except ValueError:
        restart_sec = 0.1
    return UnitDefinition(
        text=text,
        description=last("Unit", "Description"),
        exec_start=argv,
        environment=_environment(values),
        restart=last("Service", "Restart", "no"),
        restart_sec=restart_sec,
        bad_setting=bad,
        engine=parse_vllm_argv(argv) if argv else None,
    )


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


def _environment(values: _Values) -> tuple[tuple[str, str], ...]:
    """Every Environment= line's assignments, in order (a line that does not split is skipped)."""
    environment: list[tuple[str, str]] = []
    for entry in values.get(("Service", "Environment"), []):
        try:
            words = shlex.split(entry)
        except ValueError:
            words = []
        for word in words:
            if "=" in word:
                key, value = word.split("=", 1)
                environment.append((key, value))
    return tuple(environment)


def _exec_start(values: _Values) -> tuple[tuple[str, ...], str | None]:
    """The last ExecStart='s argv, and why systemd refuses the unit (None: it does not)."""
    exec_lines = [v for v in values.get(("Service", "ExecStart"), []) if v]
    if not exec_lines:
        return (), "Service has no ExecStart=, ExecStop=, or SuccessAction=. Refusing."
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
