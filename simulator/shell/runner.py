"""Running a command string: the `;`/`&&`/`||` lists, redirections, sudo, and the tools."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from .. import tools
from . import sudoers
from .program import parse
from .session import ERR, NULL, OUT, Session, Sink
from .syntax import Command, ShellSyntaxError, Unsupported

if TYPE_CHECKING:
    from ..state import Machine

_DIRS = ("/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/", "/usr/local/bin/")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.S)
_NO_VARIABLES: Mapping[str, str] = MappingProxyType({})  # for commands without a `$NAME`
# Programs that change nothing a GPU reading depends on and answer without waiting (so no other
# session runs meanwhile): between them a session keeps its GPU readings (Session.gpu_readings).
# Any other program, `sleep` included, makes it read them again.
READS_ONLY = frozenset(
    {"echo", "true", ":", "false", "hostname", "whoami", "date", "nvidia-smi", "ps"}
)


async def run(session: Session, script: str) -> int:
    """Run a whole command string like `bash -c` would; returns the exit status."""
    program = parse(script)
    error = program.error
    status = 0
    for line in program.lines:
        if error is not None and line.last_line >= error.line:
            break
        if line.error is not None:
            return _syntax_error(session, line.error)
        for connector, command in line.commands:
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
    """`exit N`: the whole script ends with this status."""

    status: int


class _Output:
    """Where one command's file descriptors point after its redirections."""

    __slots__ = ("captured", "fds", "files", "sink", "stdin")

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.fds: dict[int, str] = {1: OUT, 2: ERR}
        self.files: dict[str, str] = {}  # "file:<path>" -> path
        self.captured: dict[str, list[str]] = {}  # "file:<path>" -> what was written to it
        self.stdin: str | None = None  # "" after `< /dev/null`

    def emit(self, fd: int, text: str) -> None:
        dest = self.fds.get(fd, ERR)
        if dest == NULL or not text:
            return
        if dest.startswith("file:"):
            self.captured.setdefault(dest, []).append(text)
        else:
            self.sink.write(dest, text)

    def write_files(self, machine: Machine) -> None:
        """Append what the command wrote to each file it was redirected to."""
        if not self.files:
            return
        for dest, path in self.files.items():
            if dest in self.captured:
                previous = machine.unit_files.get(path, "")
                machine.write_file(path, previous + "".join(self.captured[dest]))


async def _execute(session: Session, command: Command, status: int) -> int | _Exit:
    env = session.env(status) if command.needs_env else _NO_VARIABLES
    if command.literal_argv is not None:
        argv = list(command.literal_argv)
    else:
        argv = [
            w.expand(env)
            for w in command.words
            if w.quoted or w.literal() is not None or w.expand(env)
        ]
    output = _Output(session.sink)
    problem = _redirect(session, command, env, output)
    if problem:
        session.sink.write(ERR, f"bash: line {command.line}: {problem}\n")
        return 1
    assignments = {}
    while argv and "=" in argv[0] and _ASSIGNMENT.fullmatch(argv[0]):
        name, _, value = argv.pop(0).partition("=")  # FOO=bar before a command
        assignments[name] = value
    if not argv:
        return 0
    return await _run_program(session, argv, command.line, status, output, assignments)


def _redirect(session: Session, command: Command, env: Mapping[str, str], output: _Output) -> str:
    """Apply the command's redirections in order; what bash complains of ("" when nothing).

    `>` empties its file at once, as bash does before the command runs.
    """
    fds = output.fds
    for redirect in command.redirects:
        target = redirect.target.expand(env)
        if redirect.op == ">&":
            if target in ("1", "2"):
                dest = fds[int(target)]
            elif target == "-":
                dest = NULL
            else:
                return f"{target}: Bad file descriptor"
        elif redirect.op == "<":
            if target != "/dev/null":
                return f"{target}: No such file or directory"
            output.stdin = ""
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
                return f"{target}: {problem}"
            dest = f"file:{target}"
            output.files[dest] = target
            if redirect.op == ">":
                session.machine.write_file(target, "")
        if redirect.fd == "both":
            fds[1] = fds[2] = dest
        elif isinstance(redirect.fd, int) and redirect.fd in (1, 2):
            fds[redirect.fd] = dest
    return ""


async def _run_program(
    session: Session,
    argv: list[str],
    line: int,
    status: int,
    output: _Output,
    assignments: dict[str, str],
) -> int | _Exit:
    """sudo, the builtins exit and sleep, or a tool, with the command's redirections."""
    as_root = False
    if argv[0] == "sudo":
        options = argv
        argv, problem = _strip_sudo(argv)
        if not problem:
            quiet = {"-n", "--non-interactive"} & set(options[1 : len(options) - len(argv)])
            problem = sudoers.refusal(
                session.machine, session.username, argv, non_interactive=bool(quiet)
            )
        if problem:
            output.emit(2, problem)
            return 1
        as_root = True
    name = _command_name(argv[0])
    if name is None:
        output.emit(2, f"bash: line {line}: {argv[0]}: No such file or directory\n")
        return 127
    if name == "exit":
        try:
            return _Exit(int(argv[1]) & 0xFF if len(argv) > 1 else status)
        except ValueError:
            output.emit(2, f"bash: line {line}: exit: {argv[1]}: numeric argument required\n")
            return _Exit(2)
    if name not in READS_ONLY:
        session.forget_gpu_readings()
    if name == "sleep":
        return await _sleep(argv, output.emit)
    tool = tools.lookup(name)
    if tool is None:
        output.emit(2, f"bash: line {line}: {name}: command not found\n")
        return 127
    stdin = ""
    if tools.needs_stdin(name, argv):
        stdin = output.stdin if output.stdin is not None else await session.stdin()
    ctx = tools.Context(
        session=session, as_root=as_root or session.is_root, line=line, env=assignments
    )
    answered = tool(ctx, argv, stdin)
    result = answered if isinstance(answered, tools.Result) else await answered
    for fd, text in result.chunks:
        output.emit(fd, text)
    output.write_files(session.machine)
    return result.status


def _command_name(argv0: str) -> str | None:
    """What argv[0] runs: a name, a bin directory's tool by its name, or an interpreter's path.

    None: no such file.
    """
    if "/" not in argv0:
        return argv0
    if any(argv0.startswith(d) and "/" not in argv0[len(d) :] for d in _DIRS):
        name = argv0.rsplit("/", 1)[1]
        return name if name in tools.COMMANDS else None
    return argv0 if argv0 in tools.interpreters() else None


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
