"""`systemctl show` of a unit, and `sha256sum` of its files."""

from __future__ import annotations

import datetime as dt
import re

from ..state import (
    UnitState,
)
from .common import (
    DIGITS_RE,
    ParseError,
    first_line,
)

# --- systemd, sha256sum --------------------------------------------------------------------

_PROPERTY_RE = re.compile(r"([A-Z][A-Za-z0-9]*)=(.*)")
_UNSET = {"", "[not set]", "n/a"}
# systemd's "no value" for a 64-bit counter; newer versions print `[not set]` instead.
_UINT64_MAX = 2**64 - 1
_ENVIRONMENT_FILE_RE = re.compile(r"(/\S*) \(ignore_errors=(yes|no)\)")
_BOOLEANS = {"yes": True, "no": False}


def _int_property(props: dict[str, str], key: str) -> int | None:
    value = props.get(key, "")
    if value in _UNSET:
        return None
    if not DIGITS_RE.fullmatch(value):
        raise ParseError(f"{key} is not a number: {value!r}")
    number = int(value)
    return None if number == _UINT64_MAX else number


def _bool_property(props: dict[str, str], key: str) -> bool | None:
    value = props.get(key, "")
    if value in _UNSET:
        return None
    if value not in _BOOLEANS:
        raise ParseError(f"{key} is not yes or no: {value!r}")
    return _BOOLEANS[value]


def _environment_files(values: list[str]) -> list[str]:
    """`EnvironmentFiles=<path> (ignore_errors=yes|no)`, one line per file, as `-/path` for an
    optional file (systemd's own notation in the unit)."""
    names = []
    for value in values:
        match = _ENVIRONMENT_FILE_RE.fullmatch(value)
        if match is None:
            raise ParseError(f"EnvironmentFiles is not `<path> (ignore_errors=...)`: {value!r}")
        names.append(("-" if match.group(2) == "yes" else "") + match.group(1))
    return names


def parse_systemd_timestamp(value: str | None) -> dt.datetime | None:
    """`Mon 2026-11-30 09:12:41 UTC`, as systemctl show prints a timestamp on a host set to
    UTC; None for anything else (another zone's name cannot be read reliably)."""
    if not value:
        return None
    try:
        return dt.datetime.strptime(value, "%a %Y-%m-%d %H:%M:%S UTC").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def parse_systemctl_show(text: str, unit: str) -> UnitState:
    """`systemctl show -p ...` output: `Key=Value` lines in any order, values may hold `=`.

    A unit that does not exist is a valid answer (LoadState=not-found). Output with no
    property at all (`Failed to get properties: Access denied`, no systemd) raises ParseError.
    Counters systemd does not keep (a unit that is not running, no memory accounting) print
    `[not set]` or 2^64-1 and read as None; a property this systemd does not know is absent.
    """
    props: dict[str, str] = {}
    environment_files: list[str] = []
    for line in text.splitlines():
        match = _PROPERTY_RE.fullmatch(line.strip())
        if match:
            props[match.group(1)] = match.group(2)
            if match.group(1) == "EnvironmentFiles":  # one line per file
                environment_files.append(match.group(2))
    if not props:
        raise ParseError(first_line(text) or "systemctl printed nothing")

    def text_property(key: str) -> str | None:
        value = props.get(key, "")
        return None if value in _UNSET else value

    return UnitState(
        unit=unit,
        load_state=text_property("LoadState"),
        active_state=text_property("ActiveState"),
        sub_state=text_property("SubState"),
        main_pid=_int_property(props, "MainPID"),
        active_enter_timestamp=text_property("ActiveEnterTimestamp"),
        n_restarts=_int_property(props, "NRestarts"),
        fragment_path=text_property("FragmentPath"),
        result=text_property("Result"),
        exec_main_start_timestamp=text_property("ExecMainStartTimestamp"),
        exec_main_pid=_int_property(props, "ExecMainPID"),
        exec_main_code=_int_property(props, "ExecMainCode"),
        exec_main_status=_int_property(props, "ExecMainStatus"),
        memory_current_bytes=_int_property(props, "MemoryCurrent"),
        memory_peak_bytes=_int_property(props, "MemoryPeak"),
        cpu_usage_nsec=_int_property(props, "CPUUsageNSec"),
        tasks_current=_int_property(props, "TasksCurrent"),
        control_group=text_property("ControlGroup"),
        drop_in_paths=(props.get("DropInPaths") or "").split(),
        unit_file_state=text_property("UnitFileState"),
        need_daemon_reload=_bool_property(props, "NeedDaemonReload"),
        environment_files=_environment_files([v for v in environment_files if v]),
    )


_SHA256_RE = re.compile(r"\\?([0-9a-fA-F]{64}) [ *].+")


def parse_sha256sum(text: str) -> str | None:
    """The digest from `sha256sum -- <path>`; None when the file does not exist."""
    line = text.strip()
    match = _SHA256_RE.fullmatch(line)
    if match:
        return match.group(1).lower()
    if line.endswith("No such file or directory") and "sha256sum: " in line:
        return None
    raise ParseError(first_line(text) or "sha256sum printed nothing")
