"""A unit's environment as systemd builds it when the main process starts.

Environment= assignments come first, then each EnvironmentFile= in order (read at start, not
at daemon-reload; a later setting overrides an earlier one). Then ExecStart='s words are
expanded: `${VAR}` anywhere in a word becomes the value, the word staying one argument; a word
that is exactly `$VAR` becomes the value split at whitespace (zero or more arguments); `$$` is
a literal `$`. An unset variable expands to nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

_WHITESPACE = " \t\n\r"
_BRACED_RE = re.compile(r"\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)\})")
_WORD_VAR_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


class MissingEnvironmentFile(Exception):
    """A mandatory EnvironmentFile= is not there: systemd refuses to spawn the process."""


def read_env_file(text: str) -> list[tuple[str, str]]:
    """systemd's environment file reader (env-file.c), assignment by assignment.

    `#`/`;` comment lines, `KEY=VALUE` with whitespace around both trimmed, `'...'` literal,
    `"..."` with `\\"`, `\\\\`, `\\$` and `` \\` `` escapes (and newlines), a backslash-newline
    continuing an unquoted value. Names that are not valid variables are skipped, as systemd
    skips them (with a warning in its log).
    """
    pairs: list[tuple[str, str]] = []
    state, key, value, trailing = "pre_key", "", "", 0
    for char in text + "\n":
        if state == "pre_key":
            if char in "#;":
                state = "comment"
            elif char not in _WHITESPACE:
                state, key, value, trailing = "key", char, "", 0
        elif state == "comment":
            state = "pre_key" if char in "\n\r" else "comment"
        elif state == "key":
            if char in "\n\r":
                state = "pre_key"  # a key without `=` is dropped
            elif char == "=":
                state = "pre_value"
            else:
                key += char
        elif char in "\n\r" and state in ("pre_value", "value"):
            value = value[: len(value) - trailing]
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key.rstrip()):
                pairs.append((key.rstrip(), value))
            state = "pre_key"
        else:
            state, value, trailing = _value_step(state, char, value, trailing)
    return pairs


def _value_step(state: str, char: str, value: str, trailing: int) -> tuple[str, str, int]:
    """One character of a value, in one of the value states of the reader."""
    if state == "pre_value":
        if char in "'\"":
            return ("single" if char == "'" else "double"), value, 0
        if char == "\\":
            return "value_escape", value, 0
        return ("pre_value", value, 0) if char in _WHITESPACE else ("value", value + char, 0)
    if state == "value":
        if char == "\\":
            return "value_escape", value, 0
        return "value", value + char, trailing + 1 if char in _WHITESPACE else 0
    if state == "value_escape":
        return "value", value + ("" if char in "\n\r" else char), 0
    if state == "single":
        return ("pre_value", value, 0) if char == "'" else ("single", value + char, 0)
    if state == "double":
        if char == '"':
            return "pre_value", value, 0
        return ("double_escape", value, 0) if char == "\\" else ("double", value + char, 0)
    # double_escape
    if char in '"\\`$':
        return "double", value + char, 0
    return "double", value + ("" if char == "\n" else "\\" + char), 0


def unit_environment(
    assignments: Sequence[tuple[str, str]],
    files: Sequence[tuple[str, bool]],
    read_file: Callable[[str], str | None],
) -> dict[str, str]:
    """Environment= then each EnvironmentFile= (path, optional); raises MissingEnvironmentFile
    for a mandatory file that is not there."""
    # systemd's "%%" is one "%" (other specifiers are not simulated).
    environment = {name: value.replace("%%", "%") for name, value in assignments}
    for path, optional in files:
        text = read_file(path)
        if text is None:
            if optional:
                continue
            raise MissingEnvironmentFile(path)
        environment.update(read_env_file(text))
    return environment


def expand_argv(words: Sequence[str], environment: dict[str, str]) -> tuple[str, ...]:
    """ExecStart='s words with variables replaced, as systemd's replace_env_argv does."""
    argv: list[str] = []
    for index, word in enumerate(words):
        whole = _WORD_VAR_RE.fullmatch(word)
        if whole and index > 0:
            argv += environment.get(whole.group(1), "").split()
            continue
        argv.append(
            _BRACED_RE.sub(
                lambda m: "$" if m.group(1) == "$" else environment.get(m.group(2), ""), word
            )
        )
    return tuple(argv)


def needs_expansion(words: Sequence[str]) -> bool:
    return any("$" in word for word in words)
