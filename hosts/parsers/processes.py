"""`ps`: which systemd unit or scope each process runs in."""

from __future__ import annotations

import re

from .common import (
    ParseError,
    excerpt,
)

_PS_LINE_RE = re.compile(r"\s*(\d+)\s+(\S+)\s*")


def parse_process_units(text: str) -> dict[int, str | None]:
    """`ps -e -o pid=,unit=`: each process id with its systemd unit or scope (`-`: none).

    A line that is not `PID UNIT` means ps did not understand the request (no systemd support,
    a BusyBox ps): that raises, since owners that cannot be read must not look like "none".
    """
    units: dict[int, str | None] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _PS_LINE_RE.fullmatch(line)
        if match is None:
            raise ParseError(f"line {number}: not `PID UNIT`: {excerpt(line, 120)!r}")
        units[int(match.group(1))] = None if match.group(2) == "-" else match.group(2)
    if not units:
        raise ParseError("ps printed nothing")
    return units
