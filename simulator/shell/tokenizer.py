"""Splitting a command string into words and operators the way bash does.

Quotes, backslashes and `$NAME`/`${NAME}`/`$?` are understood; anything that would make bash
evaluate something (command substitution, pipes, subshells, background jobs, here-documents,
process substitution) is an Unsupported error at the line where it appears.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .syntax import ShellSyntaxError, Token, Unsupported, Var, Word

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN = re.compile(r"[^ \t\n;&|()<>'\"\\$`]+")
_NO_SUBSTITUTION = "command substitution is not supported by this simulated host"


def tokenize(text: str) -> tuple[list[Token], ShellSyntaxError | None]:
    """Tokens up to the first syntax error, and that error (bash runs the lines before it)."""
    tokenizer = _Tokenizer(text)
    try:
        tokenizer.run()
    except ShellSyntaxError as exc:
        return tokenizer.tokens, exc
    return tokenizer.tokens, None


class _WordBuilder:
    """The word being read; frozen into a Word once it ends."""

    __slots__ = ("parts", "quoted")

    def __init__(self) -> None:
        self.parts: list[str | Var] = []
        self.quoted = False

    def literal(self) -> str | None:
        if all(isinstance(p, str) for p in self.parts):
            return "".join(p for p in self.parts if isinstance(p, str))
        return None


class _Tokenizer:
    """One pass over the text; each special character has its own step, the rest is words."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.i = 0
        self.line = 1
        self.tokens: list[Token] = []
        self.cur: _WordBuilder | None = None  # the word being built, if any
        self.cur_line = 1  # the line it started on
        self.steps: dict[str, Callable[[], None]] = {
            " ": self._blank,
            "\t": self._blank,
            "\n": self._newline,
            ";": self._semicolon,
            "&": self._ampersand,
            "|": self._bar,
            "(": self._parenthesis,
            ")": self._parenthesis,
            "`": self._backquote,
            "<": self._redirection,
            ">": self._redirection,
            "'": self._single_quotes,
            '"': self._double_quotes,
            "\\": self._backslash,
            "$": self._dollar,
        }

    def run(self) -> None:
        while self.i < self.n:
            c = self.text[self.i]
            if c == "#" and self.cur is None:
                self._comment()
            else:
                self.steps.get(c, self._plain)()
        self.flush()

    # --- words -------------------------------------------------------------------------------

    def flush(self) -> None:
        if self.cur is not None:
            word = Word(tuple(self.cur.parts), self.cur.quoted)
            self.tokens.append(Token("word", self.cur_line, word=word))
            self.cur = None

    def start(self) -> _WordBuilder:
        if self.cur is None:
            self.cur = _WordBuilder()
            self.cur_line = self.line
        return self.cur

    def expand(self, j: int, word: _WordBuilder) -> int:
        """Expand what follows a `$` at text[j]; returns the index after it."""
        text = self.text
        nxt = text[j + 1] if j + 1 < self.n else ""
        if nxt == "?":
            word.parts.append(Var("?"))
            return j + 2
        if nxt == "(":
            raise Unsupported(_NO_SUBSTITUTION, self.line)
        if nxt == "{":
            end = text.find("}", j + 2)
            name = text[j + 2 : end] if end != -1 else ""
            if end == -1 or not (_NAME.fullmatch(name) or name == "?"):
                raise Unsupported(
                    "parameter expansion is not supported by this simulated host", self.line
                )
            word.parts.append(Var(name))
            return end + 1
        m = _NAME.match(text, j + 1)
        if m:
            word.parts.append(Var(m.group(0)))
            return m.end()
        if nxt == "$":
            word.parts.append(Var("$"))
            return j + 2
        word.parts.append("$")
        return j + 1

    def _plain(self) -> None:
        word = self.start()
        m = _PLAIN.match(self.text, self.i)
        run_end = m.end() if m else self.i + 1
        if word.parts and isinstance(word.parts[-1], str):
            word.parts[-1] += self.text[self.i : run_end]
        else:
            word.parts.append(self.text[self.i : run_end])
        self.i = run_end

    def _dollar(self) -> None:
        self.i = self.expand(self.i, self.start())

    def _backslash(self) -> None:
        text, i = self.text, self.i
        if i + 1 < self.n and text[i + 1] == "\n":
            self.line += 1
            self.i += 2
            return
        word = self.start()
        word.quoted = True
        if i + 1 < self.n:
            word.parts.append(text[i + 1])
        self.i += 2

    def _single_quotes(self) -> None:
        text, i = self.text, self.i
        end = text.find("'", i + 1)
        if end == -1:
            raise ShellSyntaxError("unexpected EOF while looking for matching `''", self.line)
        word = self.start()
        word.quoted = True
        word.parts.append(text[i + 1 : end])
        self.line += text.count("\n", i, end)
        self.i = end + 1

    def _double_quotes(self) -> None:
        text, n = self.text, self.n
        word = self.start()
        word.quoted = True
        j = self.i + 1
        buf: list[str] = []
        while True:
            if j >= n:
                raise ShellSyntaxError("unexpected EOF while looking for matching `\"'", self.line)
            d = text[j]
            if d == '"':
                j += 1
                break
            if d == "\\" and j + 1 < n and text[j + 1] in '$`"\\\n':
                if text[j + 1] != "\n":
                    buf.append(text[j + 1])
                else:
                    self.line += 1
                j += 2
            elif d == "$":
                if buf:
                    word.parts.append("".join(buf))
                    buf = []
                j = self.expand(j, word)
            elif d == "`":
                raise Unsupported(_NO_SUBSTITUTION, self.line)
            else:
                if d == "\n":
                    self.line += 1
                buf.append(d)
                j += 1
        if buf:
            word.parts.append("".join(buf))
        self.i = j

    # --- between words ---------------------------------------------------------------------

    def _blank(self) -> None:
        self.flush()
        self.i += 1

    def _newline(self) -> None:
        self.flush()
        self.tokens.append(Token("op", self.line, op="\n"))
        self.line += 1
        self.i += 1

    def _comment(self) -> None:
        while self.i < self.n and self.text[self.i] != "\n":
            self.i += 1

    def _semicolon(self) -> None:
        self.flush()
        if self.text.startswith(";;", self.i):
            raise ShellSyntaxError("syntax error near unexpected token `;;'", self.line)
        self.tokens.append(Token("op", self.line, op=";"))
        self.i += 1

    def _ampersand(self) -> None:
        self.flush()
        if self.text.startswith("&&", self.i):
            self.tokens.append(Token("op", self.line, op="&&"))
            self.i += 2
        elif self.text.startswith("&>", self.i):
            op = ">>" if self.text.startswith("&>>", self.i) else ">"
            self.tokens.append(Token("redir", self.line, op=op, fd="both"))
            self.i += 1 + len(op)
        else:
            raise Unsupported("background jobs are not supported by this simulated host", self.line)

    def _bar(self) -> None:
        self.flush()
        if self.text.startswith("||", self.i):
            self.tokens.append(Token("op", self.line, op="||"))
            self.i += 2
        else:
            raise Unsupported("pipelines are not supported by this simulated host", self.line)

    def _parenthesis(self) -> None:
        raise Unsupported("subshells are not supported by this simulated host", self.line)

    def _backquote(self) -> None:
        raise Unsupported(_NO_SUBSTITUTION, self.line)

    def _redirection(self) -> None:
        """`<`, `>`, `>>`, `>&`, `>|`, with the fd a bare number just before names (`2>`)."""
        text, i, c = self.text, self.i, self.text[self.i]
        fd: int | str = 0 if c == "<" else 1
        if self.cur is not None and not self.cur.quoted:
            lit = self.cur.literal()
            if lit is not None and lit.isdigit():
                fd = int(lit)
                self.cur = None
        self.flush()
        if c == "<":
            if text.startswith("<<", i) or text.startswith("<(", i):
                raise Unsupported(
                    "here-documents are not supported by this simulated host", self.line
                )
            op, width = "<", 1
        elif text.startswith(">(", i):
            raise Unsupported(
                "process substitution is not supported by this simulated host", self.line
            )
        else:
            op, width = {">>": (">>", 2), ">&": (">&", 2), ">|": (">", 2)}.get(
                text[i : i + 2], (">", 1)
            )
        self.tokens.append(Token("redir", self.line, op=op, fd=fd))
        self.i += width
