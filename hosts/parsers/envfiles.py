"""Environment files (EnvironmentFile=), read the way systemd reads them, with secrets redacted.

systemd's reader (env-file.c) is a small state machine: `#` or `;` starts a comment line,
`KEY=VALUE` assigns with whitespace around both trimmed, single quotes take everything up to
the next `'`, double quotes honour backslash escapes of `"\\`$` and may span lines, and a
backslash-newline outside quotes continues the line. There is no `${VAR}` expansion and no
`export`. The scanner below follows that machine, so a value systemd would read over several
lines is redacted over all of them.

A value is secret when its key is secret-looking (controlplane.redaction.is_secret_name:
HF_TOKEN, VLLM_API_KEY, DB_PASSWORD, ..., as whole name parts, so TOKENIZERS_PARALLELISM is
not). Its value never leaves this module: parsed variables and the redacted text (what the
snapshot keeps as raw output) both say `<redacted>`, and problems name keys and line numbers,
never values. Any other value still goes through controlplane.redaction.redact_text, which
hides what looks like a secret whatever its key (`EXTRA_ARGS="--api-key sk-..."`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from controlplane.redaction import REDACTED, is_secret_name, redact_text

_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# cat's own complaint (`cat: /etc/x.env: Permission denied`) is kept: it is not file content.
_CAT_ERROR_RE = re.compile(r"cat: /\S*: [A-Z][a-z]+(?: [a-z]+)*")
_WHITESPACE = " \t\n\r"
_NEWLINE = "\n\r"
_ESCAPABLE = '"\\`$'


_NAME_RE = re.compile(r"[A-Za-z_][\w.-]*")


def is_secret_key(key: str) -> bool:
    """Whether an environment variable's value is secret, by its name."""
    return is_secret_name(key)


def _comment_is_secret(comment: str) -> bool:
    """A comment that names a secret-looking key (`# HF_TOKEN=...`) or holds a secret."""
    return any(is_secret_name(name) for name in _NAME_RE.findall(comment)) or (
        redact_text(comment) != comment
    )


@dataclass
class _Entry:
    """One piece of the file: an assignment, a comment, or text systemd drops."""

    kind: str  # "assignment", "comment" or "stray"
    start: int  # offsets into the text, end exclusive (not counting the ending newline)
    end: int
    line: int
    key: str = ""
    value: str = ""
    closed: bool = True  # False: the file ended inside a quote


@dataclass
class _Scanner:
    """systemd's env-file state machine, remembering where each entry starts and ends."""

    text: str
    entries: list[_Entry] = field(default_factory=list)
    state: str = "pre_key"
    start: int = 0
    line: int = 1
    first_line: int = 1  # where the entry being read began
    key: str = ""
    value: list[str] = field(default_factory=list)
    trailing: int = 0  # whitespace at the end of an unquoted value, dropped at its end

    def run(self) -> list[_Entry]:
        for pos, char in enumerate(self.text):
            self.step(pos, char)
            if char == "\n":
                self.line += 1
        self.finish(len(self.text))
        return self.entries

    def begin(self, kind: str, pos: int) -> None:
        self.state, self.start, self.key, self.value, self.trailing = kind, pos, "", [], 0
        self.first_line = self.line

    def close(self, kind: str, end: int, closed: bool = True) -> None:
        value = "".join(self.value)
        if self.trailing:
            value = value[: -self.trailing]
        self.entries.append(
            _Entry(kind, self.start, end, self.first_line, self.key.rstrip(), value, closed)
        )
        self.state = "pre_key"

    def step(self, pos: int, char: str) -> None:  # one transition of the machine per character
        state = self.state
        if state == "pre_key":
            if char in "#;":
                self.begin("comment", pos)
            elif char not in _WHITESPACE:
                self.begin("key", pos)
                self.key = char
        elif state == "key":
            if char in _NEWLINE:
                self.close("stray", pos)
            elif char == "=":
                self.state = "pre_value"
            else:
                self.key += char
        elif state in ("comment", "comment_escape"):
            if char in _NEWLINE:
                self.close("comment", pos)
            else:
                self.state = "comment_escape" if char == "\\" and state == "comment" else "comment"
        else:
            self.value_step(pos, char)

    def value_step(self, pos: int, char: str) -> None:
        state = self.state
        if state in ("pre_value", "value") and char in _NEWLINE:
            self.close("assignment", pos)
        elif state == "pre_value":
            if char in "'\"":
                self.state = "single" if char == "'" else "double"
            elif char == "\\":
                self.state = "value_escape"
            elif char not in _WHITESPACE:
                self.state = "value"
                self.value.append(char)
        elif state == "value":
            if char == "\\":
                self.state, self.trailing = "value_escape", 0
            else:
                self.value.append(char)
                self.trailing = self.trailing + 1 if char in _WHITESPACE else 0
        elif state == "value_escape":
            self.state = "value"
            if char not in _NEWLINE:
                self.value.append(char)
        elif state == "single":
            self.state = "pre_value" if char == "'" else "single"
            if char != "'":
                self.value.append(char)
        elif state == "double":
            if char == '"':
                self.state = "pre_value"
            elif char == "\\":
                self.state = "double_escape"
            else:
                self.value.append(char)
        elif state == "double_escape":
            self.state = "double"
            if char in _ESCAPABLE:
                self.value.append(char)
            elif char != "\n":
                self.value += ["\\", char]

    def finish(self, end: int) -> None:
        if self.state in ("comment", "comment_escape"):
            self.close("comment", end)
        elif self.state == "key":
            self.close("stray", end)
        elif self.state != "pre_key":
            self.close("assignment", end, closed=self.state not in ("single", "double"))


def _scan(text: str) -> list[_Entry]:
    return _Scanner(text.replace("\r\n", "\n")).run()


def parse_environment_file(text: str) -> tuple[dict[str, str], list[str]]:
    """(variables, problems) of an environment file; secret values are `<redacted>`.

    Strict where systemd would silently do something else: `export KEY=...`, a key that is not
    a shell name, text that is not an assignment, and a quote left open at the end of the file
    are problems (systemd ignores or misreads them). The last assignment of a key wins.
    """
    variables: dict[str, str] = {}
    problems: list[str] = []
    for entry in _scan(text):
        if entry.kind == "comment":
            continue
        if entry.kind == "stray":
            problems.append(f"line {entry.line}: not KEY=VALUE (systemd ignores it)")
            continue
        key = entry.key
        if key.startswith("export ") or key.startswith("export\t"):
            shown = key.split(None, 1)[-1]
            problems.append(f"line {entry.line}: `export {shown}=` (systemd ignores the line)")
            continue
        if not _KEY_RE.fullmatch(key):
            problems.append(f"line {entry.line}: {key[:60]!r} is not a variable name")
            continue
        if not entry.closed:
            problems.append(f"line {entry.line}: the quote of {key} is never closed")
        variables[key] = REDACTED if is_secret_key(key) else redact_text(entry.value)
    return variables, problems


def assignments(text: str) -> dict[str, str]:
    """Every variable the file sets as systemd reads it (the last assignment wins), secret or
    not: the one way values leave this module, for the probe to call the server with the key
    its unit gives it (hosts.parsers.api_keys, which expands the unit's ExecStart= with them).
    The caller holds them in memory only."""
    return {
        e.key: e.value for e in _scan(text) if e.kind == "assignment" and _KEY_RE.fullmatch(e.key)
    }


def redact_environment_text(text: str) -> str:
    """The file with every secret value, and every line systemd would not read, replaced.

    What remains is what a person may see: the assignments of keys that are not secret-looking,
    comments that name nothing secret-looking (a commented-out token goes with its line), and
    cat's own error line; then controlplane.redaction hides whatever else looks secret.
    """
    text = text.replace("\r\n", "\n")
    pieces: list[str] = []
    done = 0
    for entry in _scan(text):
        replacement = None
        if entry.kind == "stray" and not _CAT_ERROR_RE.fullmatch(text, entry.start, entry.end):
            replacement = REDACTED
        elif entry.kind == "assignment" and is_secret_key(entry.key):
            replacement = f"{entry.key}={REDACTED}"
        elif entry.kind == "comment" and _comment_is_secret(text[entry.start : entry.end]):
            # A commented-out token is still a token; the whole comment goes.
            replacement = f"{text[entry.start]} {REDACTED}"
        if replacement is not None:
            pieces += [text[done : entry.start], replacement]
            done = entry.end
    pieces.append(text[done:])
    return redact_text("".join(pieces))
