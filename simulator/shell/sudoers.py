"""sudo's policy on a simulated host: the rules in /etc/sudoers.d/, matched as sudo matches them.

The simulated /etc/sudoers holds nothing but `@includedir /etc/sudoers.d` (no `root ALL=(ALL)
ALL` line). Once a file is there, its rules are all anyone may run under sudo, root included,
so a fleet registered as root stands in for the control plane's own account. With no file
there, every sudo runs, as it always has on the simulator.

Only the grammar an entry like the control plane's uses: `user[,user] host = [(runas)]
[TAG:] command, ...` with comments, `\\` continuations, `\\,` `\\:` `\\=` escapes and
`Defaults` lines (ignored). Matching is sudo's: the program by its full path (a bare name is
looked up in /usr/bin, where sudo's secure_path finds it on this host; /bin is /usr/bin on a
merged-/usr system); a rule without arguments allows any, `""` allows none; otherwise its
arguments are a wildcard pattern (fnmatch without FNM_PATHNAME: `*` also matches spaces and
slashes) over the user's arguments joined by single spaces, or a regular expression when they
read `^...$`. The last matching rule decides.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..state import Machine

SUDOERS_DIR = "/etc/sudoers.d/"
_TAGS = {
    "NOPASSWD", "PASSWD", "SETENV", "NOSETENV", "EXEC", "NOEXEC", "FOLLOW", "NOFOLLOW",
    "LOG_INPUT", "NOLOG_INPUT", "LOG_OUTPUT", "NOLOG_OUTPUT", "MAIL", "NOMAIL",
    "INTERCEPT", "NOINTERCEPT",
}  # fmt: skip
_TAG = re.compile(r"([A-Z_]+)\s*:\s*")
_ALIAS = re.compile(r"(User|Runas|Host|Cmnd|Cmd)_Alias\b")
_WILDCARD = re.compile(r"[*?\[]")


class SudoersError(ValueError):
    """A line sudo would refuse to parse (or that uses grammar the simulator leaves out)."""

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line


@dataclass(frozen=True)
class Rule:
    """One command of a user specification, with the runas list and tags in force for it."""

    users: tuple[str, ...]
    hosts: tuple[str, ...]
    runas: tuple[str, ...]  # empty: root only
    nopasswd: bool
    negated: bool
    program: str  # a full path, a directory ending in "/", or ALL
    args: str | None  # None: any arguments

    def applies(self, user: str, host: str) -> bool:
        runs_as_root = not self.runas or "root" in self.runas or "ALL" in self.runas
        return (
            runs_as_root
            and (user in self.users or "ALL" in self.users)
            and (host in self.hosts or "ALL" in self.hosts)
        )

    def matches(self, path: str, args: str) -> bool:
        if self.program == "ALL":
            return True
        if not _program_matches(self.program, path):
            return False
        if self.args is None:
            return True
        if self.args == '""':
            return args == ""
        if self.args.startswith("^") and self.args.endswith("$"):
            return re.search(self.args, args) is not None
        return fnmatch.fnmatchcase(args, self.args)


def _program_matches(pattern: str, path: str) -> bool:
    if pattern.endswith("/"):
        return path.rsplit("/", 1)[0] + "/" == pattern
    if not _WILDCARD.search(pattern):
        return pattern == path
    ours, theirs = pattern.split("/"), path.split("/")  # FNM_PATHNAME: `*` stops at a slash
    return len(ours) == len(theirs) and all(map(fnmatch.fnmatchcase, theirs, ours))


def resolved(program: str) -> str:
    """The full path sudo runs (and matches) for argv[0] on the simulated host."""
    path = program if "/" in program else f"/usr/bin/{program}"
    for merged, real in (("/bin/", "/usr/bin/"), ("/sbin/", "/usr/sbin/")):
        if path.startswith(merged):
            return real + path[len(merged) :]
    return path


# --- parsing ---------------------------------------------------------------------------------


def _split(text: str, sep: str) -> list[str]:
    """`text` cut at each `sep` that no backslash escapes (the escapes stay in)."""
    parts, current, i = [], [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if text[i] == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(text[i])
        i += 1
    parts.append("".join(current))
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\([,:=\\#\"])", r"\1", text)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Lines joined at `\\` continuations, comments and blank lines dropped, with line numbers."""
    lines: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.split("\n"), start=1):
        if not pending:
            start = number
        if raw.endswith("\\") and not raw.endswith("\\\\"):
            pending += raw[:-1] + " "
            continue
        line, pending = re.sub(r"(?<!\\)#(?!\d).*", "", pending + raw).strip(), ""
        if not line:
            continue  # blank, or a comment (#include and #includedir too: not followed here)
        lines.append((start, line))
    return lines


def parse(text: str, path: str = SUDOERS_DIR) -> list[Rule]:
    rules: list[Rule] = []
    for number, line in _logical_lines(text):
        if line.startswith(("Defaults", "@include")):
            continue
        if _ALIAS.match(line):
            raise SudoersError(path, number, "aliases are not simulated")
        rules += _user_spec(line, path, number)
    return rules


def _user_spec(line: str, path: str, number: int) -> list[Rule]:
    head, *body = _split(line, "=")
    words = re.sub(r"\s*,\s*", ",", head.strip()).split()
    if not body or len(words) != 2:
        raise SudoersError(path, number, "syntax error")
    users, hosts = (tuple(w.split(",")) for w in words)
    runas: tuple[str, ...] = ()
    nopasswd = False
    rules = []
    for spec in _split("=".join(body), ","):
        spec = spec.strip()
        if spec.startswith("("):
            inside, sep, spec = spec[1:].partition(")")
            if not sep:
                raise SudoersError(path, number, "syntax error")
            runas = tuple(u.strip() for u in inside.split(":")[0].split(",") if u.strip())
            spec = spec.strip()
        while (tag := _TAG.match(spec)) and tag.group(1) in _TAGS:
            nopasswd = {"NOPASSWD": True, "PASSWD": False}.get(tag.group(1), nopasswd)
            spec = spec[tag.end() :]
        negated = spec.startswith("!")
        words = spec.lstrip("!").split()
        if not words or len(_split(spec, ":")) > 1:
            raise SudoersError(path, number, "syntax error")
        args = _unescape(" ".join(words[1:])) if len(words) > 1 else None
        if args is not None and "\\" in args and not args.startswith("^"):
            raise SudoersError(path, number, "escaped wildcards are not simulated")
        rules.append(
            Rule(users, hosts, runas, nopasswd, negated, program=_unescape(words[0]), args=args)
        )
    return rules


@functools.lru_cache(maxsize=64)
def _parsed(path: str, text: str) -> tuple[Rule, ...]:
    return tuple(parse(text, path))


# --- the decision ------------------------------------------------------------------------------


def policy_files(machine: Machine) -> list[tuple[str, str]]:
    """The files sudo reads from /etc/sudoers.d, in its order (names with `.` or `~` skipped)."""
    names = [
        path
        for path in machine.unit_files
        if path.startswith(SUDOERS_DIR)
        and not any(c in path[len(SUDOERS_DIR) :] for c in "./~")
        and path != SUDOERS_DIR
    ]
    return [(path, machine.unit_files[path]) for path in sorted(names)]


def refusal(machine: Machine, user: str, argv: list[str], *, non_interactive: bool) -> str:
    """What sudo prints when `user` may not run `argv` as root ("" when it may)."""
    files = policy_files(machine)
    if not files:
        return ""
    try:
        rules = [rule for path, text in files for rule in _parsed(path, text)]
    except SudoersError as exc:
        return (
            f">>> {exc.path}: syntax error near line {exc.line} <<<\n"
            f"sudo: parse error in {exc.path} near line {exc.line}\n"
            "sudo: no valid sudoers sources found, quitting\n"
            "sudo: unable to initialize policy plugin\n"
        )
    path, args = resolved(argv[0]), " ".join(argv[1:])
    mine = [rule for rule in rules if rule.applies(user, machine.name)]
    decided = next((rule for rule in reversed(mine) if rule.matches(path, args)), None)
    allowed = decided is not None and not decided.negated
    if user == "root":  # root is never asked for a password, so it hears why at once
        if allowed:
            return ""
        if not mine:
            return f"{user} is not in the sudoers file.\n"
        shown = f"{path} {args}" if args else path
        host = machine.name
        return f"Sorry, user {user} is not allowed to execute '{shown}' as root on {host}.\n"
    if allowed and decided is not None and decided.nopasswd:
        return ""
    # Anyone else authenticates first, even for a command they may not run: with -n, no tty.
    if non_interactive:
        return "sudo: a password is required\n"
    return (
        "sudo: a terminal is required to read the password; either use the -S option to read "
        "from standard input or configure an askpass helper\nsudo: a password is required\n"
    )
