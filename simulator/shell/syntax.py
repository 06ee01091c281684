"""The shell's grammar: words, tokens, redirections and commands, and the lists they form."""

from __future__ import annotations

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


@dataclass
class Word:
    parts: list[str | Var] = field(default_factory=list)
    quoted: bool = False

    def literal(self) -> str | None:
        if all(isinstance(p, str) for p in self.parts):
            return "".join(p for p in self.parts if isinstance(p, str))
        return None

    def expand(self, env: dict[str, str]) -> str:
        return "".join(p if isinstance(p, str) else env.get(p.name, "") for p in self.parts)


@dataclass
class Token:
    kind: str  # "word", "op", "redir"
    line: int
    word: Word | None = None
    op: str = ""
    fd: int | str = 1


@dataclass
class Redirect:
    fd: int | str  # 0, 1, 2 or "both" for &>
    op: str  # ">", ">>", ">&", "<"
    target: Word


@dataclass
class Command:
    words: list[Word]
    redirects: list[Redirect]
    line: int


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
            result.append((connector, Command(words, redirects, line)))
            connector, words, redirects = tok.op, [], []
            line = tok.line
        i += 1
    if words or redirects:
        result.append((connector, Command(words, redirects, line)))
    elif connector in ("&&", "||"):
        raise ShellSyntaxError("syntax error: unexpected end of file", line)
    return result
