"""The problems of one probe parse, and the sections they come from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controlplane.redaction import redact_text

from ..state import Problem
from .common import NO_OUTPUT, ParseError, Section, excerpt, first_line


class Collector:
    """Problems of one probe parse, and the sections they come from."""

    def __init__(self, sections: dict[str, Section]) -> None:
        self.sections = sections
        self.problems: list[Problem] = []

    def add(self, section: str, message: str) -> None:
        # A message may quote the host's output: redacted before it is cut, so a cut cannot
        # leave a token too short to be recognised.
        shown = excerpt(redact_text(message))
        self.problems.append(Problem(section, shown or "unreadable output"))

    def take(self, name: str) -> Section | None:
        """The section if it ran to its end marker; otherwise a Problem and None."""
        section = self.sections.get(name)
        if section is None:
            self.add(name, NO_OUTPUT)
            return None
        if section.truncated:
            self.add(name, "output cut short (no end marker)")
            return None
        return section

    def attempt(self, name: str, parse: Callable[[], Any]) -> Any:
        """Run one parser; what it cannot read becomes a Problem, never an exception."""
        try:
            return parse()
        except ParseError as exc:
            self.add(name, str(exc))
        except Exception as exc:  # a parser bug must not lose the rest of the probe
            self.add(name, f"parser failed: {exc!r}")
        return None

    def check_exit(self, section: Section, command: str, before: int) -> None:
        """A non-zero exit is a Problem, unless the output already explained itself."""
        if section.exit_status and len(self.problems) == before:
            detail = first_line(section.output)
            suffix = f": {detail}" if detail else ""
            self.add(section.name, f"{command} exited with status {section.exit_status}{suffix}")
