"""Splitting the probe script's output into its framed sections."""

from __future__ import annotations

import re

from ..commands import MARK_BEGIN, MARK_END
from .common import (
    Section,
)

# --- sections ------------------------------------------------------------------------------

_END_STATUS_RE = re.compile(r"([0-9]{1,3})")


def _end_marker_status(line: str, name: str) -> tuple[str, int] | None:
    """(text before the marker, status) if `line` ends with the end marker of section `name`.

    The marker may follow output that had no final newline, so it is looked for at the end of
    the line, and only for the open section, so other text cannot close it by accident.
    """
    marker = f"{MARK_END}{name}:"
    pos = line.rfind(marker)
    if pos < 0:
        return None
    match = _END_STATUS_RE.fullmatch(line[pos + len(marker) :])
    if not match or int(match.group(1)) > 255:
        return None
    return line[:pos], int(match.group(1))


def split_sections(stdout: str) -> dict[str, Section]:
    """Split probe output by its marker lines. Text outside sections is dropped.

    Only newline-terminated marker lines count: a last line cut short could be a marker whose
    name or exit status lost characters (`...:12` from `...:127`).
    """
    sections: dict[str, Section] = {}
    pieces = stdout.replace("\r\n", "\n").split("\n")
    name: str | None = None
    output: list[str] = []
    for i, piece in enumerate(pieces):
        complete = i < len(pieces) - 1
        if not complete and piece == "":
            break
        if complete and piece.startswith(MARK_BEGIN) and len(piece) > len(MARK_BEGIN):
            if name is not None:
                sections[name] = Section(name, "".join(output), None, True)
            name, output = piece[len(MARK_BEGIN) :], []
            continue
        if name is None:
            continue  # banner, MOTD or other stray text between sections
        ended = _end_marker_status(piece, name) if complete else None
        if ended is not None:
            before, status = ended
            sections[name] = Section(name, "".join(output) + before, status, False)
            name, output = None, []
            continue
        if not complete and (f"{MARK_END}{name}:".startswith(piece) or MARK_END in piece):
            break  # a marker cut mid-line is not output
        output.append(piece + "\n" if complete else piece)
    if name is not None:
        sections[name] = Section(name, "".join(output), None, True)
    return sections
