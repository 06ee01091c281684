"""The shell's grammar: words, tokens, redirections and commands, and the lists they form."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


class ShellSyntaxError(Exception):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


class Unsupported(ShellSyntaxError):
    """Valid bash that the simulated host will not run (it would mean evaluating something)."""


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True, slots=True)
class Word:
    """One word as written: its literal pieces and `$NAME`s, and whether any of it was quoted.

    Immutable: a parsed script is cached and shared by every run of the same text.
    """

    parts: tuple[str | Var, ...] = ()
    quoted: bool = False
    text: str | None = field(default=None, init=False, compare=False)  # literal(), worked out once

    def __post_init__(self) -> None:
        if all(isinstance(p, str) for p in self.parts):
            object.__setattr__(self, "text", "".join(p for p in self.parts if isinstance(p, str)))

    def literal(self) -> str | None:
        return self.text

    def expand(self, env: Mapping[str, str]) -> str:
        if self.text is not None:
            return self.text
        return "".join(p if isinstance(p, str) else env.get(p.name, "") for p in self.parts)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "word", "op", "redir"
    line: int
    word: Word | None = None
    op: str = ""
    fd: int | str = 1


@dataclass(frozen=True, slots=True)
class Redirect:
    fd: int | str  # 0, 1, 2 or "both" for &>
    op: str  # ">", ">>", ">&", "<"
    target: Word


@dataclass(frozen=True, slots=True)
class Command:
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]
    line: int
    # The argv when no word has a `$NAME` in it (most command lines): no expansion to do.
    literal_argv: tuple[str, ...] | None = field(default=None, init=False, compare=False)
    # Whether any word or redirection target has a `$NAME` (only then is $? and the like needed)
    needs_env: bool = field(default=True, init=False, compare=False)

    def __post_init__(self) -> None:
        texts = [w.text for w in self.words]
        if all(t is not None for t in texts):
            object.__setattr__(self, "literal_argv", tuple(t for t in texts if t is not None))
        targets = [r.target.text for r in self.redirects]
        object.__setattr__(
            self, "needs_env", self.literal_argv is None or any(t is None for t in targets)
        )


def parse_lines(tokens: list[Token]) -> list[list[Token]]:
    lines: list[list[Token]] = [[]]
    for tok in tokens:
        if tok.kind == "op" and tok.op == "\n":
            lines.append([])
        else:
            lines[-1].append(tok)
    return [ln for ln in lines if ln]


def parse_list(tokens: list[Token]) -> list[tuple[str, Command]]:
    """One line: commands joined by `;`, `&&` and `||`, as (connector, command) pairs."""
    result: list[tuple[str, Command]] = []
    connector = ";"
    words: list[Word] = []
    redirects: list[Redirect] = []
    line = tokens[0].line if tokens else 1
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.kind == "word" and tok.word is not None:
            words.append(tok.word)
        elif tok.kind == "redir":
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if nxt is None or nxt.kind != "word" or nxt.word is None:
                shown = "newline" if nxt is None else (nxt.op or ">")
                raise ShellSyntaxError(f"syntax error near unexpected token `{shown}'", tok.line)
            redirects.append(Redirect(tok.fd, tok.op, nxt.word))
            i += 1
        else:
            if not words and not redirects:
                raise ShellSyntaxError(f"syntax error near unexpected token `{tok.op}'", tok.line)
            result.append((connector, Command(tuple(words), tuple(redirects), line)))
            connector, words, redirects = tok.op, [], []
            line = tok.line
        i += 1
    if words or redirects:
        result.append((connector, Command(tuple(words), tuple(redirects), line)))
    elif connector in ("&&", "||"):
        raise ShellSyntaxError("syntax error: unexpected end of file", line)
    return result
