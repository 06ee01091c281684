"""A very small bash: enough grammar to run the control plane's command lines, nothing more.

It splits words the way bash does (quotes, backslashes, `"$?"`), runs `;`/newline/`&&`/`||`
lists and the redirections `2>&1`, `>/dev/null` and friends, and looks each command up in the
simulated tools. It never evaluates anything: command substitution, pipes, subshells and
background jobs are refused with an error, so an argument that tries to inject a command stays
one inert literal word.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .processes import Login
    from .state import Machine

OUT, ERR, NULL = "out", "err", "null"


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


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN = re.compile(r"[^ \t\n;&|()<>'\"\\$`]+")


def tokenize(text: str) -> tuple[list[Token], ShellSyntaxError | None]:
    """Tokens up to the first syntax error, and that error (bash runs the lines before it)."""
    tokens: list[Token] = []
    i, n, line = 0, len(text), 1
    cur: Word | None = None
    cur_line = 1

    def flush() -> None:
        nonlocal cur
        if cur is not None:
            tokens.append(Token("word", cur_line, word=cur))
            cur = None

    def start() -> Word:
        nonlocal cur, cur_line
        if cur is None:
            cur = Word()
            cur_line = line
        return cur

    def dollar(j: int, word: Word, in_quotes: bool) -> int:
        """Expand what follows a `$` at text[j]; returns the index after it."""
        nxt = text[j + 1] if j + 1 < n else ""
        if nxt == "?":
            word.parts.append(Var("?"))
            return j + 2
        if nxt == "(":
            raise Unsupported("command substitution is not supported by this simulated host", line)
        if nxt == "{":
            end = text.find("}", j + 2)
            name = text[j + 2 : end] if end != -1 else ""
            if end == -1 or not (_NAME.fullmatch(name) or name == "?"):
                raise Unsupported(
                    "parameter expansion is not supported by this simulated host", line
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

    try:
        while i < n:
            c = text[i]
            if c in " \t":
                flush()
                i += 1
            elif c == "\n":
                flush()
                tokens.append(Token("op", line, op="\n"))
                line += 1
                i += 1
            elif c == "#" and cur is None:
                while i < n and text[i] != "\n":
                    i += 1
            elif c == ";":
                flush()
                if text.startswith(";;", i):
                    raise ShellSyntaxError("syntax error near unexpected token `;;'", line)
                tokens.append(Token("op", line, op=";"))
                i += 1
            elif c == "&":
                flush()
                if text.startswith("&&", i):
                    tokens.append(Token("op", line, op="&&"))
                    i += 2
                elif text.startswith("&>", i):
                    op = ">>" if text.startswith("&>>", i) else ">"
                    tokens.append(Token("redir", line, op=op, fd="both"))
                    i += 1 + len(op)
                else:
                    raise Unsupported(
                        "background jobs are not supported by this simulated host", line
                    )
            elif c == "|":
                flush()
                if text.startswith("||", i):
                    tokens.append(Token("op", line, op="||"))
                    i += 2
                else:
                    raise Unsupported("pipelines are not supported by this simulated host", line)
            elif c in "()":
                raise Unsupported("subshells are not supported by this simulated host", line)
            elif c == "`":
                raise Unsupported(
                    "command substitution is not supported by this simulated host", line
                )
            elif c in "<>":
                fd: int | str = 0 if c == "<" else 1
                if cur is not None and not cur.quoted:
                    lit = cur.literal()
                    if lit is not None and lit.isdigit():
                        fd = int(lit)
                        cur = None
                flush()
                if c == "<":
                    if text.startswith("<<", i) or text.startswith("<(", i):
                        raise Unsupported(
                            "here-documents are not supported by this simulated host", line
                        )
                    tokens.append(Token("redir", line, op="<", fd=fd))
                    i += 1
                elif text.startswith(">>", i):
                    tokens.append(Token("redir", line, op=">>", fd=fd))
                    i += 2
                elif text.startswith(">&", i):
                    tokens.append(Token("redir", line, op=">&", fd=fd))
                    i += 2
                elif text.startswith(">|", i):
                    tokens.append(Token("redir", line, op=">", fd=fd))
                    i += 2
                elif text.startswith(">(", i):
                    raise Unsupported(
                        "process substitution is not supported by this simulated host", line
                    )
                else:
                    tokens.append(Token("redir", line, op=">", fd=fd))
                    i += 1
            elif c == "'":
                end = text.find("'", i + 1)
                if end == -1:
                    raise ShellSyntaxError("unexpected EOF while looking for matching `''", line)
                word = start()
                word.quoted = True
                word.parts.append(text[i + 1 : end])
                line += text.count("\n", i, end)
                i = end + 1
            elif c == '"':
                word = start()
                word.quoted = True
                j = i + 1
                buf = []
                while True:
                    if j >= n:
                        raise ShellSyntaxError(
                            "unexpected EOF while looking for matching `\"'", line
                        )
                    d = text[j]
                    if d == '"':
                        j += 1
                        break
                    if d == "\\" and j + 1 < n and text[j + 1] in '$`"\\\n':
                        if text[j + 1] != "\n":
                            buf.append(text[j + 1])
                        else:
                            line += 1
                        j += 2
                    elif d == "$":
                        if buf:
                            word.parts.append("".join(buf))
                            buf = []
                        j = dollar(j, word, True)
                    elif d == "`":
                        raise Unsupported(
                            "command substitution is not supported by this simulated host", line
                        )
                    else:
                        if d == "\n":
                            line += 1
                        buf.append(d)
                        j += 1
                if buf:
                    word.parts.append("".join(buf))
                i = j
            elif c == "\\":
                if i + 1 < n and text[i + 1] == "\n":
                    line += 1
                    i += 2
                    continue
                word = start()
                word.quoted = True
                if i + 1 < n:
                    word.parts.append(text[i + 1])
                i += 2
            elif c == "$":
                word = start()
                i = dollar(i, word, False)
            else:
                word = start()
                m = _PLAIN.match(text, i)
                run_end = m.end() if m else i + 1
                if word.parts and isinstance(word.parts[-1], str):
                    word.parts[-1] += text[i:run_end]
                else:
                    word.parts.append(text[i:run_end])
                i = run_end
        flush()
    except ShellSyntaxError as exc:
        return tokens, exc
    return tokens, None


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


@dataclass
class Result:
    """What a simulated program wrote, in order, and how it exited."""

    chunks: list[tuple[int, str]] = field(default_factory=list)
    status: int = 0
    files: dict[str, str] = field(default_factory=dict)

    def out(self, text: str) -> Result:
        self.chunks.append((1, text))
        return self

    def err(self, text: str) -> Result:
        self.chunks.append((2, text))
        return self

    def exit(self, status: int) -> Result:
        self.status = status
        return self


class Sink:
    """Where a session's output goes: collected here, or streamed by a subclass."""

    def __init__(self) -> None:
        self.stdout: list[str] = []
        self.stderr: list[str] = []

    def write(self, stream: str, text: str) -> None:
        (self.stdout if stream == OUT else self.stderr).append(text)

    def flush(self) -> None:
        """Deliver what was written so far (nothing to do when collecting)."""


@dataclass
class Session:
    """One shell invocation on a host, as one SSH exec request runs it."""

    machine: Machine
    username: str = "root"
    sink: Sink = field(default_factory=Sink)
    read_stdin: Callable[[], Awaitable[str]] | None = None
    on_fault_change: Callable[[str, bool], None] | None = None
    login: Login | None = None  # logind's session, made when something first looks at it
    _stdin_used: bool = False

    @property
    def is_root(self) -> bool:
        return self.username == "root"

    def ensure_login(self) -> Login:
        if self.login is None:
            self.login = self.machine.new_login(self.username)
        return self.login

    async def stdin(self) -> str:
        if self._stdin_used or self.read_stdin is None:
            return ""
        self._stdin_used = True
        return await self.read_stdin()

    def env(self, status: int) -> dict[str, str]:
        home = "/root" if self.is_root else f"/home/{self.username}"
        return {
            "?": str(status),
            "$": "4711",
            "HOME": home,
            "USER": self.username,
            "LOGNAME": self.username,
            "HOSTNAME": self.machine.name,
            "SHELL": "/bin/bash",
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        }


async def run(session: Session, script: str) -> int:
    """Run a whole command string like `bash -c` would; returns the exit status."""
    tokens, error = tokenize(script)
    status = 0
    lines = parse_lines(tokens)
    for line_tokens in lines:
        if error is not None and line_tokens[-1].line >= error.line:
            break
        try:
            commands = parse_list(line_tokens)
        except ShellSyntaxError as exc:
            return _syntax_error(session, exc)
        for connector, command in commands:
            if connector == "&&" and status != 0:
                continue
            if connector == "||" and status == 0:
                continue
            outcome = await _execute(session, command, status)
            if isinstance(outcome, _Exit):
                return outcome.status
            status = outcome
    if error is not None:
        return _syntax_error(session, error)
    return status


def _syntax_error(session: Session, exc: ShellSyntaxError) -> int:
    if isinstance(exc, Unsupported):
        session.sink.write(ERR, f"bash: line {exc.line}: {exc}\n")
    else:
        session.sink.write(ERR, f"bash: -c: line {exc.line}: {exc}\n")
    return 2


@dataclass
class _Exit:
    status: int


_DIRS = ("/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/", "/usr/local/bin/")


async def _execute(session: Session, command: Command, status: int) -> int | _Exit:
    from . import tools

    env = session.env(status)
    sink = session.sink
    line = command.line
    argv = [
        w.expand(env) for w in command.words if w.quoted or w.literal() is not None or w.expand(env)
    ]
    fds: dict[int, str] = {1: OUT, 2: ERR}
    file_targets: dict[str, str] = {}  # "file:<path>" -> path
    stdin_override: str | None = None
    for redirect in command.redirects:
        target = redirect.target.expand(env)
        if redirect.op == ">&":
            if target in ("1", "2"):
                dest = fds[int(target)]
            elif target == "-":
                dest = NULL
            else:
                sink.write(ERR, f"bash: line {line}: {target}: Bad file descriptor\n")
                return 1
        elif redirect.op == "<":
            if target != "/dev/null":
                sink.write(ERR, f"bash: line {line}: {target}: No such file or directory\n")
                return 1
            stdin_override = ""
            continue
        elif target == "/dev/null":
            dest = NULL
        elif target in ("/dev/stdout", "/dev/fd/1"):
            dest = fds[1]
        elif target in ("/dev/stderr", "/dev/fd/2"):
            dest = fds[2]
        else:
            problem = tools.writable(session, target)
            if problem:
                sink.write(ERR, f"bash: line {line}: {target}: {problem}\n")
                return 1
            dest = f"file:{target}"
            file_targets[dest] = target
            if redirect.op == ">":
                session.machine.write_file(target, "")
        if redirect.fd == "both":
            fds[1] = fds[2] = dest
        elif isinstance(redirect.fd, int) and redirect.fd in (1, 2):
            fds[redirect.fd] = dest
    while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0], re.S):
        argv.pop(0)  # FOO=bar before a command: the simulated tools read no environment
    if not argv:
        return 0

    captured: dict[str, list[str]] = {}

    def emit(fd: int, text: str) -> None:
        dest = fds.get(fd, ERR)
        if dest == NULL or not text:
            return
        if dest.startswith("file:"):
            captured.setdefault(dest, []).append(text)
        else:
            sink.write(dest, text)

    as_root = False
    if argv[0] == "sudo":
        argv, problem = _strip_sudo(argv)
        if problem:
            emit(2, problem)
            return 1
        as_root = True
    name = argv[0]
    if "/" in name:
        if not any(name.startswith(d) and "/" not in name[len(d) :] for d in _DIRS):
            if name not in tools.interpreters():
                emit(2, f"bash: line {line}: {name}: No such file or directory\n")
                return 127
        else:
            name = name.rsplit("/", 1)[1]
            if name not in tools.COMMANDS:
                emit(2, f"bash: line {line}: {argv[0]}: No such file or directory\n")
                return 127
    if name == "exit":
        try:
            return _Exit(int(argv[1]) & 0xFF if len(argv) > 1 else status)
        except ValueError:
            emit(2, f"bash: line {line}: exit: {argv[1]}: numeric argument required\n")
            return _Exit(2)
    if name == "sleep":
        return await _sleep(argv, emit)
    tool = tools.COMMANDS.get(name) if "/" not in name else tools.python
    if tool is None:
        emit(2, f"bash: line {line}: {name}: command not found\n")
        return 127
    stdin = ""
    if tools.needs_stdin(name, argv):
        stdin = stdin_override if stdin_override is not None else await session.stdin()
    ctx = tools.Context(session=session, as_root=as_root or session.is_root, line=line)
    result = tool(ctx, argv, stdin)
    for fd, text in result.chunks:
        emit(fd, text)
    for dest, path in file_targets.items():
        if dest in captured:
            previous = session.machine.unit_files.get(path, "")
            session.machine.write_file(path, previous + "".join(captured[dest]))
    return result.status


def _strip_sudo(argv: list[str]) -> tuple[list[str], str]:
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        flag = argv[i]
        if flag == "--":
            i += 1
            break
        if flag in ("-u", "--user"):
            user = argv[i + 1] if i + 1 < len(argv) else ""
            if user not in ("root", "0", "#0"):
                return [], f"sudo: unknown user {user}\nsudo: error initializing audit plugin\n"
            i += 2
            continue
        if flag not in ("-n", "--non-interactive", "-E", "-H", "-i", "-S"):
            return [], f"sudo: invalid option -- '{flag.lstrip('-')[:1]}'\n"
        i += 1
    rest = argv[i:]
    if not rest:
        return [], "usage: sudo -h | -K | -k | -V\n"
    return rest, ""


async def _sleep(argv: list[str], emit: Callable[[int, str], None]) -> int:
    try:
        seconds = sum(float(a.rstrip("s")) for a in argv[1:])
    except ValueError:
        emit(
            2,
            f"sleep: invalid time interval '{argv[1]}'\nTry 'sleep --help' for more information.\n",
        )
        return 1
    if not argv[1:]:
        emit(2, "sleep: missing operand\nTry 'sleep --help' for more information.\n")
        return 1
    await asyncio.sleep(min(seconds, 300.0))
    return 0
