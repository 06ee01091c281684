"""The problems of one probe parse, and the sections they come from."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from controlplane.redaction import redact_text

from ..state import Problem
from .common import NO_OUTPUT, ParseError, Section, excerpt, first_line
from .reuse import SectionMemo

T = TypeVar("T")


class Collector:
    """Problems of one probe parse, and the sections they come from."""

    def __init__(self, sections: dict[str, Section], memo: SectionMemo | None = None) -> None:
        self.sections = sections
        self.problems: list[Problem] = []
        self.memo = memo

    def reuse(self, section: Section, key: Hashable, read: Callable[[], T]) -> T:
        """`read()`, which reads `section` alone (and what `key` names) and adds its problems
        here; or, when the host's previous probe read the same output the same way, what it
        gave then, with the same problems (hosts.parsers.reuse). What it returns may be shared
        with that probe's state: never change it in place."""
        if self.memo is None:
            return read()
        memo_key = (section.name, key)
        found, value, problems = self.memo.lookup(memo_key, section)
        if found:
            self.problems.extend(Problem(p.section, p.message) for p in problems)
            return value  # type: ignore[no-any-return]
        before = len(self.problems)
        value = read()
        self.memo.store(memo_key, section, value, self.problems[before:])
        return value

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
