"""`systemctl cat`: a unit's fragment and drop-ins, the environment files they name, and
redacting the secrets a unit file may carry."""

from __future__ import annotations

import re
from collections.abc import Sequence

from controlplane.redaction import REDACTED, is_secret_name, redact_text

from .common import ParseError, first_line

_NO_FILES_RE = re.compile(r"No files found for \S+\.")
_HEADER_RE = re.compile(r"# (/\S*)")
# systemctl cat warns on stderr (folded into the section) before the files when the loaded
# unit is older than the files on disk: `# Warning: <unit> changed on disk, ...`.
_WARNING_PREFIX = "# "


def parse_systemctl_cat(text: str, expected: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """(path, contents) of each file `systemctl cat` printed: the fragment, then each drop-in.

    systemctl prints `# <path>` before each file and a newline before every header but the
    first, and copies each file byte for byte. Where the files start is known from `expected`
    (FragmentPath and DropInPaths from `systemctl show`), so a comment inside a file that
    looks like a header cannot split it. Without `expected`, a `# /path` line that opens the
    output or follows an empty line is taken as a header. `No files found for <unit>.` (the
    unit does not exist) is an empty list.
    """
    if _NO_FILES_RE.fullmatch(text.strip()):
        return []
    if not text.strip():
        raise ParseError("systemctl cat printed nothing")
    if expected is None:
        expected = _headers(text)
    if not expected:  # quoted redacted: it may be a unit file's line after all
        shown = first_line(redact_unit_text(text))
        raise ParseError(f"no `# /path` line in systemctl cat output: {shown!r}")
    start = _find_header(text, expected[0], 0, first=True)
    preamble = text[:start]
    if any(line and not line.startswith(_WARNING_PREFIX) for line in preamble.split("\n")):
        lines = len(preamble.splitlines())
        raise ParseError(f"{lines} unexpected lines before {expected[0]} in systemctl cat output")
    files: list[tuple[str, str]] = []
    for i, path in enumerate(expected):
        body = start + len(f"# {path}\n")
        if i + 1 < len(expected):
            start = _find_header(text, expected[i + 1], body, first=False)
            files.append((path, text[body:start]))
            start += 1  # the newline systemctl prints before each later header
        else:
            files.append((path, text[body:]))
    return files


def _find_header(text: str, path: str, pos: int, *, first: bool) -> int:
    """Where a header is. The first opens the output or a line; a later one is searched as
    `\\n# <path>\\n` from `pos` and its index is that of the newline systemctl adds between
    files, so the separator is not taken as part of the file before it."""
    header = f"# {path}\n"
    if first and text.startswith(header):
        return 0
    found = text.find("\n" + header, pos)
    if found < 0:
        raise ParseError(f"systemctl cat did not print {path}")
    return found + 1 if first else found


def _headers(text: str) -> list[str]:
    """Header paths when `systemctl show` could not say which files to expect: `# /path`
    lines that open the output, follow the warning preamble, or follow an empty line."""
    paths: list[str] = []
    lines = text.split("\n")
    for index, line in enumerate(lines):
        match = _HEADER_RE.fullmatch(line)
        if match is None:
            continue
        previous = lines[index - 1] if index else ""
        if previous == "" or (not paths and previous.startswith(_WARNING_PREFIX)):
            paths.append(match.group(1))
    return paths


def environment_file_names(texts: Sequence[str]) -> list[str]:
    """EnvironmentFile= of the [Service] section across a fragment and its drop-ins, in the
    order systemd reads them, in systemd's notation (`-/path`: optional). An empty assignment
    resets the list, as it does for systemd."""
    names: list[str] = []
    for text in texts:
        section = ""
        for line in _logical_lines(text):
            stripped = line.strip()
            if not stripped or stripped[0] in "#;":
                continue
            if stripped.startswith("[") and stripped.endswith("]"):
                section = stripped[1:-1]
                continue
            key, eq, value = stripped.partition("=")
            if not eq or section != "Service" or key.strip() != "EnvironmentFile":
                continue
            value = value.strip()
            if value:
                names.append(value)
            else:
                names.clear()
    return names


def _logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined, as systemd reads unit files."""
    lines: list[str] = []
    pending = ""
    for raw in text.split("\n"):
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


# --- secrets in unit files -----------------------------------------------------------------

_ENVIRONMENT_RE = re.compile(r"(\s*Environment\s*=)(.*)", re.DOTALL)


def redact_unit_text(text: str) -> str:
    """The unit file with its secrets replaced by `<redacted>`: the values of secret-looking
    Environment= keys, read word by word as systemd reads them (`"KEY=a b"` is one value),
    then whatever controlplane.redaction finds on any line (`--api-key x`, `db_password=x`
    in ExecStart=, a token in a URL). Other lines are left byte for byte."""
    out: list[str] = []
    pending: list[str] = []
    for raw in text.split("\n"):
        pending.append(raw)
        if raw.rstrip().endswith("\\"):
            continue  # a logical line continues; redact it whole
        out.append(_redact_environment("\n".join(pending)))
        pending = []
    if pending:
        out.append(_redact_environment("\n".join(pending)))
    return redact_text("\n".join(out))


def _redact_environment(line: str) -> str:
    match = _ENVIRONMENT_RE.fullmatch(line)
    if match and _names_secret(match.group(2)):
        line = match.group(1) + _redact_assignments(match.group(2))
    return line


def _names_secret(value: str) -> bool:
    """Whether any KEY= in an Environment= value is secret-looking."""
    return any(is_secret_name(key) for key in re.findall(r"([A-Za-z_][\w.-]*)=", value))


def _word_spans(value: str) -> list[tuple[int, int]] | None:
    """Where Environment='s words are (a word may hold quoted parts: `A="b c"`); None when a
    quote is never closed, so the words cannot be told apart."""
    spans: list[tuple[int, int]] = []
    i, n = 0, len(value)
    while i < n:
        if value[i].isspace():
            i += 1
            continue
        start = i
        while i < n and not value[i].isspace():
            if value[i] in "\"'":
                quote, i = value[i], i + 1
                while i < n and value[i] != quote:
                    i += 2 if quote == '"' and value[i] == "\\" else 1
                if i >= n:
                    return None
            i += 2 if value[i] == "\\" else 1
        spans.append((start, min(i, n)))
    return spans


def _redact_assignments(value: str) -> str:
    """Each `KEY=VALUE` word whose key is secret-looking loses its value; an unbalanced quote
    takes the whole value with it."""
    spans = _word_spans(value)
    if spans is None:
        return REDACTED
    pieces: list[str] = []
    done = 0
    for start, end in spans:
        key = re.sub("[\"']", "", value[start:end]).split("=", 1)[0]
        if is_secret_name(key):
            pieces += [value[done:start], f"{key}={REDACTED}"]
            done = end
    pieces.append(value[done:])
    return "".join(pieces)


# --- ExecStart= as systemd runs it --------------------------------------------------------

_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BARE_VAR_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def expand_variables(words: list[str], variables: dict[str, str]) -> list[str]:
    """systemd's ExecStart= expansion: `${VAR}` becomes the value as part of its word; a word
    that is just `$VAR` becomes the value split at whitespace. Unknown variables expand to
    nothing, as systemd does."""
    out: list[str] = []
    for word in words:
        bare = _BARE_VAR_RE.fullmatch(word)
        if bare:
            out += variables.get(bare.group(1), "").split()
            continue
        out.append(_VAR_RE.sub(lambda m: variables.get(m.group(1), ""), word))
    return out
