"""`journalctl -u <unit> -n <N> --no-pager -o short-iso`: a unit's newest journal lines."""

from __future__ import annotations

import re

from controlplane.redaction import redact_text

from .common import ParseError, excerpt, first_line

NO_ENTRIES = "-- No entries --"
# short-iso stamps: `+0000` before systemd 255, `+00:00` since (ISO 8601 with the colon).
_ENTRY_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[+-]\d\d:?\d\d|Z) ")
# `-- Boot 5d2c... --` (journalctl marks reboots between entries) and `-- Reboot --`.
_MARKER_RE = re.compile(r"-- .* --")
_NO_PERMISSION = (
    "No journal files were opened due to insufficient permissions.",
    "Hint: You are currently not seeing messages from other users and the system.",
)
ELLIPSIS = "…"
# uvicorn's access line for one of the probe's own requests (vLLM logs every request it
# serves): three a probe, so left alone they would be most of a quiet server's journal.
_OWN_PROBE_RE = re.compile(
    r'INFO:\s+127\.0\.0\.1:\d+ - "GET (?:/health|/v1/models|/metrics) HTTP/1\.[01]" \d{3}\b'
)


def is_own_probe_line(line: str) -> bool:
    """Whether a journal line is uvicorn logging a request the probe itself made."""
    return _OWN_PROBE_RE.search(line) is not None


def parse_journal(text: str, *, lines: int, max_bytes: int) -> list[str]:
    """The journal lines, oldest first, bounded to the newest `lines` and `max_bytes` (UTF-8,
    one newline per line counted): the newest lines are kept, and a single newest line longer
    than the budget is cut with an ellipsis.

    `-- No entries --` is an empty journal. A user who may not read the system journal gets a
    hint instead of entries: that raises ParseError, since "nothing" would be a wrong answer.
    Multi-line messages continue on indented lines, which are kept as they are. uvicorn's
    access lines for the probe's own requests (GET /health, /v1/models, /metrics from the
    loopback) are left out.
    """
    body = text.replace("\r\n", "\n").split("\n")
    while body and body[-1] == "":
        body.pop()
    if any(line.startswith(_NO_PERMISSION) for line in body):
        raise ParseError(
            "journalctl may not read the system journal as this user "
            "(it needs the systemd-journal or adm group, or sudo)"
        )
    if body == [NO_ENTRIES] or not body:
        return []
    if not (_ENTRY_RE.match(body[0]) or _MARKER_RE.fullmatch(body[0])):
        shown = excerpt(first_line(redact_text(text)), 120)
        raise ParseError(f"not journalctl short-iso output: {shown!r}")
    # Logs can print secrets (a token in an error, the engine's args): none is kept. The lines
    # are redacted together (a private key spans lines), before the budget cuts any of them.
    kept = redact_text("\n".join(body)).split("\n")
    # The probe's own requests say nothing about the server and would crowd out what does.
    kept = [line for line in kept if not is_own_probe_line(line)]
    return bounded(kept, lines=lines, max_bytes=max_bytes)


def bounded(entries: list[str], *, lines: int, max_bytes: int) -> list[str]:
    """The newest `lines` entries that fit in `max_bytes` together (see parse_journal)."""
    kept: list[str] = []
    used = 0
    for line in reversed(entries[-lines:] if lines > 0 else []):
        size = len(line.encode()) + 1
        if used + size > max_bytes:
            if not kept:  # the newest line alone is too long: keep its start
                cut = line.encode()[: max(0, max_bytes - 1 - len(ELLIPSIS.encode()))]
                kept.append(cut.decode(errors="ignore") + ELLIPSIS)
            break
        kept.append(line)
        used += size
    kept.reverse()
    return kept
