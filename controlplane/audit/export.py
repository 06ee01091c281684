"""Exported audit events, as CSV or JSON Lines, one line at a time (for streaming)."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from typing import Any

from .chain import ROW_COLUMNS, row_canonical

EXPORT_HEADER = ROW_COLUMNS  # every stored field, so an export can be verified offline
_FORMULA_START = frozenset("=+-@\t\r")


class _Line:
    """csv.writer needs a file; this one hands back what was written."""

    def write(self, value: str) -> str:
        return value


def csv_lines(rows: Iterable[tuple[Any, ...]]) -> Iterator[str]:
    # A spreadsheet would run a cell starting with "=" (a user agent or a failed login's name
    # is attacker-chosen); a leading quote keeps it text. The JSON Lines export is verbatim.
    writer = csv.writer(_Line())
    risky = _FORMULA_START
    yield writer.writerow(EXPORT_HEADER)
    for row in rows:
        yield writer.writerow(
            ["'" + v if v.__class__ is str and v[:1] in risky else v for v in row]
        )


def jsonl_lines(rows: Iterable[tuple[Any, ...]]) -> Iterator[str]:
    # Each line is the event's canonical JSON plus its hash: drop "hash", re-serialise with
    # sorted keys and SHA-256 gives "hash" back, so an unfiltered export verifies offline.
    for row in rows:
        text = row_canonical(row)
        yield f'{text[:-1]},"hash":"{row[18]}"}}\n'
