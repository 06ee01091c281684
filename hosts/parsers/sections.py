"""Splitting the probe script's output into its framed sections."""

from __future__ import annotations

import re

from ..commands import MARK_BEGIN, MARK_END
from .common import (
    Section,
)

# --- sections ------------------------------------------------------------------------------

_END_STATUS_RE = re.compile(r"([0-9]{1,3})")
# What both markers begin with (hosts.commands: "@@cp:begin:", "@@cp:end:").
_MARK_PREFIX = "@@cp:"
assert MARK_BEGIN.startswith(_MARK_PREFIX) and MARK_END.startswith(_MARK_PREFIX)


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

    Only lines holding the markers' common prefix can open or close a section, so those are
    found with `str.find` and every line between them is taken as it is: a probe prints a
    thousand lines and about forty markers, and looking at each line in Python was a tenth of
    a probe's parse. tests/hosts/test_parsers_sections.py holds this to the line-by-line
    reading it replaced, on generated output.
    """
    text = stdout.replace("\r\n", "\n") if "\r" in stdout else stdout
    complete = text.rfind("\n") + 1  # text[:complete] is the newline-terminated lines
    sections: dict[str, Section] = {}
    name: str | None = None
    start = 0  # where the open section's output begins
    pos = 0
    while (hit := text.find(_MARK_PREFIX, pos, complete)) >= 0:
        line_start = text.rfind("\n", 0, hit) + 1
        line_end = text.find("\n", hit)
        pos = line_end + 1
        if text.startswith(MARK_BEGIN, line_start) and line_end > line_start + len(MARK_BEGIN):
            if name is not None:
                sections[name] = Section(name, text[start:line_start], None, True)
            name, start = text[line_start + len(MARK_BEGIN) : line_end], line_end + 1
            continue
        if name is None:
            continue  # banner, MOTD or other stray text between sections
        ended = _end_marker_status(text[line_start:line_end], name)
        if ended is not None:
            before, status = ended
            sections[name] = Section(name, text[start:line_start] + before, status, False)
            name = None
    if name is not None:
        piece = text[complete:]  # the last line, cut short (or empty)
        cut = not piece or f"{MARK_END}{name}:".startswith(piece) or MARK_END in piece
        # a marker cut mid-line is not output
        sections[name] = Section(name, text[start:complete] if cut else text[start:], None, True)
    return sections
