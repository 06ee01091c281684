"""What every parser shares: the error type, framing records, and reading values."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_MESSAGE = 300  # problem messages quote remote text; keep them readable
NO_OUTPUT = "no output (probe cut short)"


class ParseError(ValueError):
    """Remote output that cannot be read as what the command should have printed."""


@dataclass(frozen=True)
class Section:
    """One framed part of the probe output. No end marker means the output was cut short."""

    name: str
    output: str
    exit_status: int | None
    truncated: bool


@dataclass(frozen=True)
class HttpResult:
    """A curl response: body, HTTP status (None when no response arrived), curl's error text."""

    body: str
    status: int | None
    error: str | None


def excerpt(text: str, limit: int = MAX_MESSAGE) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return excerpt(line)
    return ""


_NUMBER_RE = re.compile(r"([-+]?[0-9]+(?:\.[0-9]+)?)(?:\s*(MiB|MHz|W|%|C))?")
DIGITS_RE = re.compile(r"[0-9]+")


def is_unavailable(value: str) -> bool:
    """`[N/A]`, `[Not Supported]`, `[Unknown Error]`, `[GPU is lost]`... and plain `N/A`."""
    return value in {"", "N/A"} or (value.startswith("[") and value.endswith("]"))


def read_number(value: str, unit: str | None) -> float | None:
    if is_unavailable(value):
        return None
    match = _NUMBER_RE.fullmatch(value)
    if not match or (match.group(2) is not None and match.group(2) != unit):
        raise ParseError(f"not a number{' in ' + unit if unit else ''}: {value!r}")
    return float(match.group(1))


def parse_epoch_seconds(text: str) -> int:
    """`date +%s`: one line of digits (seconds since the epoch on the host's clock)."""
    value = text.strip()
    if not DIGITS_RE.fullmatch(value):
        raise ParseError(f"not a time in seconds: {excerpt(value) or 'no output'}")
    return int(value)


def read_count(value: str, what: str) -> int | None:
    """A count nvidia-smi printed: digits, or None where unavailable (`[N/A]`)."""
    if is_unavailable(value):
        return None
    if not DIGITS_RE.fullmatch(value):
        raise ParseError(f"{what} is not a number: {value!r}")
    return int(value)
