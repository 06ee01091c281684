"""Reading one section of the probe with its parser, its problems collected."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .collector import Collector
from .common import Section


def read_smi(
    out: Collector, name: str, parse: Callable[..., list[Any]], benign_exit: int
) -> list[Any]:
    """nvidia-smi exits 6 when it finds no GPU: an empty answer, not a failure."""
    section = out.take(name)
    if section is None:
        return []
    return out.reuse(
        section, (read_smi, parse, benign_exit), lambda: _read_smi(out, section, parse, benign_exit)
    )


def _read_smi(
    out: Collector, section: Section, parse: Callable[..., list[Any]], benign_exit: int
) -> list[Any]:
    name = section.name
    before = len(out.problems)
    bad_rows: list[str] = []
    rows = out.attempt(name, lambda: parse(section.output, problems=bad_rows))
    for message in bad_rows:
        out.add(name, message)
    if rows == [] and section.exit_status == benign_exit:
        return []
    out.check_exit(section, "nvidia-smi", before)
    return rows or []


def read_section(out: Collector, name: str, parse: Callable[[str], Any], command: str) -> Any:
    """What `parse` makes of section `name`, or None; a failure or an unexplained non-zero
    exit of `command` is a Problem."""
    section = out.take(name)
    if section is None:
        return None

    def read() -> Any:
        before = len(out.problems)
        parsed = out.attempt(name, lambda: parse(section.output))
        out.check_exit(section, command, before)
        return parsed

    return out.reuse(section, (read_section, parse, command), read)
