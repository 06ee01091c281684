"""Drain hooks as remote commands: an administrator's command on the host, or an HTTP call sent
from the host with curl, that takes the host out of its load balancer's rotation and puts it
back.

A hook is a template an administrator keeps (deployments.drain_hooks.DrainHook), never text from
a request. Its words may name the host, the unit and the port as `{host}`, `{unit}` and
`{port}`, which are filled in from validated rows when the command is built. Every word, before
and after that, must match a strict pattern; the line is then joined with `shlex.quote` like
every other command (hosts.commands.join), so nothing in it reaches a shell unquoted.

An HTTP hook is sent from the host rather than from the control plane's worker: the agents that
take a backend out of rotation usually listen on the host itself or on a network the host
reaches (a Consul or Envoy agent on 127.0.0.1, an internal load balancer's API), and a request
from the host goes through the same fenced, logged and audited shell as every other step,
instead of letting the worker reach arbitrary addresses from the control plane's own network.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from controlplane.redaction import looks_secret

from . import validators
from .commands import HTTP_MARK, UnsafeCommand

PLACEHOLDERS = ("host", "unit", "port")
MAX_WORDS = 32
MAX_URL_CHARS = 500
TIMEOUT_MIN_SECONDS = 1
TIMEOUT_MAX_SECONDS = 300
HTTP_METHODS = ("POST", "PUT", "DELETE", "PATCH", "GET")

# One word after the program: letters, digits and . _ : / = @ % + , - and placeholders. No
# spaces, quotes, $, `, ;, |, &, <, >, * or ?: nothing a shell would read, quoted or not.
_WORD = re.compile(r"[A-Za-z0-9._:/=@%+,{}-]{1,200}")
_PLACEHOLDER = re.compile(r"\{([a-z]+)\}")
# What may follow the host in a URL: its path and query, with placeholders.
_PATH_AND_QUERY = re.compile(r"[A-Za-z0-9._~:/?=&%+,@{}-]{0,400}")


def _placeholders_known(word: str, what: str) -> None:
    """`{name}` only for the known names, and no other brace."""
    for name in _PLACEHOLDER.findall(word):
        if name not in PLACEHOLDERS:
            known = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
            raise UnsafeCommand(f"{what}: {{{name}}} is not a placeholder (use {known})")
    if "{" in _PLACEHOLDER.sub("", word) or "}" in _PLACEHOLDER.sub("", word):
        raise UnsafeCommand(f"{what}: a brace that is not part of a placeholder")


def _not_secret(word: str, what: str) -> None:
    # A hook's words are shown on pages, kept in steps and audited: a credential belongs in the
    # program's own configuration on the host.
    if looks_secret(word):
        raise UnsafeCommand(f"{what} looks like a secret: keep it in the hook's own config")


def check_command_template(argv: object) -> list[str]:
    """An administrator's drain or undrain command: an absolute program path, then up to
    MAX_WORDS - 1 plain words. Returns it; raises UnsafeCommand saying what is wrong."""
    if not isinstance(argv, list) or not all(isinstance(w, str) for w in argv):
        raise UnsafeCommand("a hook command is a list of words")
    if not 1 <= len(argv) <= MAX_WORDS:
        raise UnsafeCommand(f"a hook command has 1 to {MAX_WORDS} words")
    program, *words = argv
    if not re.fullmatch(validators.ABS_PATH_RE, program):
        raise UnsafeCommand(
            "the program must be an absolute path of letters, digits and . _ + - "
            f"(got {program[:60]!r})"
        )
    for number, word in enumerate(words, 2):
        what = f"word {number}"
        if not _WORD.fullmatch(word):
            raise UnsafeCommand(
                f"{what} may hold letters, digits, . _ : / = @ % + , - and placeholders only"
            )
        _placeholders_known(word, what)
        _not_secret(word, what)
    return list(argv)


def check_url_template(url: object) -> str:
    """An administrator's drain or undrain URL: http or https, a host, a path and query of
    plain characters (placeholders allowed there), no credentials and no fragment."""
    if not isinstance(url, str) or not 1 <= len(url) <= MAX_URL_CHARS:
        raise UnsafeCommand(f"a hook URL has 1 to {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeCommand(f"the URL cannot be read: {exc}") from exc
    if parts.scheme not in ("http", "https"):
        raise UnsafeCommand("the URL must start with http:// or https://")
    if "@" in parts.netloc:
        raise UnsafeCommand("the URL may not carry credentials (user:password@)")
    host = parts.hostname or ""
    if not re.fullmatch(validators.ADDRESS_RE, host) or (port is not None and port < 1):
        raise UnsafeCommand("the URL needs a host name or an IP address (and a port 1..65535)")
    if parts.fragment or "#" in url:
        raise UnsafeCommand("the URL may not have a fragment (#...)")
    rest = url[len(f"{parts.scheme}://{parts.netloc}") :]
    if not _PATH_AND_QUERY.fullmatch(rest):
        raise UnsafeCommand(
            "the URL's path and query may hold letters, digits, . _ ~ : / ? = & % + , @ - and "
            "placeholders only"
        )
    _placeholders_known(rest, "the URL")
    for word in re.split(r"[/?&=]", rest):
        _not_secret(word, "a part of the URL")
    return url


def check_method(method: object) -> str:
    if method not in HTTP_METHODS:
        raise UnsafeCommand(f"refusing HTTP method {method!r} (one of {', '.join(HTTP_METHODS)})")
    assert isinstance(method, str)
    return method


def check_timeout(seconds: object) -> int:
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int)
        or not TIMEOUT_MIN_SECONDS <= seconds <= TIMEOUT_MAX_SECONDS
    ):
        raise UnsafeCommand(
            f"refusing a hook timeout of {seconds!r} s "
            f"({TIMEOUT_MIN_SECONDS}..{TIMEOUT_MAX_SECONDS})"
        )
    return seconds


def hook_values(*, host: str, unit: str, port: int) -> dict[str, str]:
    """What the placeholders stand for, each checked against its own pattern first."""
    if not re.fullmatch(validators.HOST_NAME_RE, host):
        raise UnsafeCommand(f"refusing host name {host!r}")
    if not re.fullmatch(validators.UNIT_RE, unit):
        raise UnsafeCommand(f"refusing unit name {unit!r}")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise UnsafeCommand(f"refusing port {port!r}")
    return {"host": host, "unit": unit, "port": str(port)}


def _fill(template: str, values: Mapping[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def hook_command(template: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """The command a command hook runs, placeholders filled in; checked again as a whole."""
    argv = check_command_template(list(template))
    filled = [argv[0], *(_fill(w, values) for w in argv[1:])]
    for word in filled[1:]:
        if not _WORD.fullmatch(word) or "{" in word or "}" in word:
            raise UnsafeCommand(f"refusing hook word {word[:60]!r}")
    return filled


def hook_request(method: str, template: str, values: Mapping[str, str], timeout: int) -> list[str]:
    """The curl command line an HTTP hook runs on the host: no redirects followed, http and
    https only, the status printed after the body (parsers.parse_http reads it)."""
    url = _fill(check_url_template(template), values)
    check_url_template(url)
    return [
        "curl",
        "-sS",
        "-X",
        check_method(method),
        "-m",
        str(check_timeout(timeout)),
        "--proto",
        "=http,https",
        "-w",
        f"\\n{HTTP_MARK}%{{http_code}}\\n",
        url,
    ]
