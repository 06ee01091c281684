"""A command string parsed once: its lines' command lists, kept for the next run of the same text.

The control plane sends each host the same probe script every round, and tokenizing it was a
fifth of the simulator's time; parsing is a pure function of the text, so its result is cached
by the exact string. What is cached is immutable (tuples and frozen dataclasses), so no run can
change what the next one sees; everything that depends on the host (`$?`, `$HOME`, the tools'
output) is worked out when a command runs, never here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .syntax import Command, ShellSyntaxError, parse_lines, parse_list
from .tokenizer import tokenize

# Distinct scripts a simulator process sees over and over: one probe script per deployment
# shape (with and without the integrity check) and the few commands a change job repeats.
CACHE_SIZE = 512


@dataclass(frozen=True, slots=True)
class Line:
    """One line's `;`/`&&`/`||` list, or the syntax error bash reports when it reaches it."""

    last_line: int  # the line number of its last token (a quoted word may span lines)
    commands: tuple[tuple[str, Command], ...]
    error: ShellSyntaxError | None


@dataclass(frozen=True, slots=True)
class Program:
    """The lines before the tokenizer's first error, and that error (bash runs what precedes
    it, then reports it)."""

    lines: tuple[Line, ...]
    error: ShellSyntaxError | None


@functools.lru_cache(maxsize=CACHE_SIZE)
def parse(script: str) -> Program:
    tokens, error = tokenize(script)
    lines = []
    for line_tokens in parse_lines(tokens):
        last_line = line_tokens[-1].line
        try:
            lines.append(Line(last_line, tuple(parse_list(line_tokens)), None))
        except ShellSyntaxError as exc:
            lines.append(Line(last_line, (), exc.with_traceback(None)))
    return Program(tuple(lines), error.with_traceback(None) if error is not None else None)
