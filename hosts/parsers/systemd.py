"""`systemctl show` and `sha256sum` of unit files."""

from __future__ import annotations

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
_UNSET = {"", "[not set]"}


def _int_property(props: dict[str, str], key: str) -> int | None:
    value = props.get(key, "")
    if value in _UNSET:
        return None
    if not DIGITS_RE.fullmatch(value):
        raise ParseError(f"{key} is not a number: {value!r}")
    return int(value)


def parse_systemctl_show(text: str, unit: str) -> UnitState:
    """`systemctl show -p ...` output: `Key=Value` lines in any order, values may hold `=`.

    A unit that does not exist is a valid answer (LoadState=not-found). Output with no
    property at all (`Failed to get properties: Access denied`, no systemd) raises ParseError.
    """
    props: dict[str, str] = {}
    for line in text.splitlines():
        match = _PROPERTY_RE.fullmatch(line.strip())
        if match:
            props[match.group(1)] = match.group(2)
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
