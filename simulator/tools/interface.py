"""What the shell hands a tool (its Context) and what the tool hands back (a Result)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..shell import Session
    from ..state import Machine


@dataclass
class Context:
    session: Session
    as_root: bool
    line: int
    # `NAME=value` words before the command: only programs that run real code read them.
    env: dict[str, str] = field(default_factory=dict)

    @property
    def machine(self) -> Machine:
        return self.session.machine


@dataclass
class Result:
    """What a simulated program wrote, in order, and how it exited."""

    chunks: list[tuple[int, str]] = field(default_factory=list)
    status: int = 0

    def out(self, text: str) -> Result:
        self.chunks.append((1, text))
        return self

    def err(self, text: str) -> Result:
        self.chunks.append((2, text))
        return self

    def exit(self, status: int) -> Result:
        self.status = status
        return self


# A program: its context, argv (argv[0] as typed) and stdin, to what it printed and its status;
# programs that take time (a completion, a pip download, a script) answer with an awaitable.
Tool = Callable[[Context, list[str], str], Result | Awaitable[Result]]
