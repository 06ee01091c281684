"""curl: HTTP requests to the inference servers on the host, with the flags people use.

A completion takes as long as the engine needs to generate it (`simulator.serving`), in the
host's time: `-m` and `%{time_total}` are host seconds, scaled like the host's clock. A body of
`@-` is read from stdin (`--data-binary @-`); other `@file` bodies cannot be read here.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from dataclasses import dataclass, field

from .. import http
from .interface import Context, Result

_USAGE_HINT = "curl: try 'curl --help' or 'curl --manual' for more information\n"
_VALUE_SHORT = set("mwHdXoAeuK")
_VALUE_LONG = {
    "--max-time": "m",
    "--write-out": "w",
    "--header": "H",
    "--data": "d",
    "--data-binary": "d",
    "--data-raw": "d",
    "--data-ascii": "d",
    "--json": "json",
    "--request": "X",
    "--output": "o",
    "--connect-timeout": "connect-timeout",
    "--user-agent": "A",
    "--config": "K",
    "--proto": "proto",
}
_FLAG_LONG = {
    "--silent": "s",
    "--show-error": "S",
    "--fail": "f",
    "--include": "i",
    "--location": "L",
    "--insecure": "k",
    "--verbose": "v",
    "--compressed": "compressed",
    "--no-progress-meter": "s",
}


@dataclass
class _Options:
    flags: set[str] = field(default_factory=set)  # by short letter
    values: dict[str, list[str]] = field(default_factory=dict)  # by short letter, in order
    urls: list[str] = field(default_factory=list)


def needs_stdin(name: str, argv: list[str]) -> bool:
    """`--data-binary @-`: the request's body is what the client sends on stdin; `-K -`: so
    are curl's options (a header that must stay off the command line)."""
    if name != "curl":
        return False
    args = argv[1:]
    body = any(a == "@-" or a.endswith("=@-") for a in args)
    config = any(a in ("-K", "--config") and b == "-" for a, b in itertools.pairwise(args))
    return body or config or "--config=-" in args


# One line of a curl config file: `name = "value"`, `name "value"`, `name value` or `--name
# value`; curl's own reader (src/tool_parsecfg.c) also takes `:` for `=`.
_CONFIG_LINE = re.compile(
    r'\s*(?:--)?([A-Za-z][\w-]*)\s*(?:[=:]\s*|\s+)(?:"((?:[^"\\]|\\.)*)"|(\S+))'
)


# Inside double quotes curl knows the escapes t, n, r and v; before any other character the
# backslash is dropped (an escaped quote is a quote, an escaped backslash a backslash).
_CONFIG_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_CONFIG_CONTROLS = {"t": "\t", "n": "\n", "r": "\r", "v": "\v"}


def _unescape(match: re.Match[str]) -> str:
    return _CONFIG_CONTROLS.get(match.group(1), match.group(1))


def _config(text: str) -> list[str]:
    """A curl config (`-K -`) as the words it stands for: `header = "X: y"` is `-H 'X: y'`."""
    words: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _CONFIG_LINE.match(line)
        if match is None:
            continue
        name, quoted, plain = match.groups()
        value = _CONFIG_ESCAPE.sub(_unescape, quoted) if quoted is not None else plain
        words += [f"--{name}", value]
    return words


async def curl(ctx: Context, argv: list[str], stdin: str) -> Result:
    """One or more requests; a completion returns once the engine has generated it."""
    options = _options(argv[1:])
    if isinstance(options, Result):
        return options
    if options.values.pop("K", None) == ["-"]:
        options = _options([*argv[1:], *_config(stdin)])
        if isinstance(options, Result):
            return options
        options.values.pop("K", None)
        stdin = ""
    result = Result()
    values = options.values
    if not options.urls:
        return result.err(f"curl: no URL specified\n{_USAGE_HINT}").exit(2)
    data = values.get("d") or values.get("json")
    method = (values.get("X") or ["POST" if data else "GET"])[-1]
    body = "&".join(data) if data else None
    if body == "@-":
        body = stdin
    elif data and body is not None and body.startswith("@"):
        return result.err("curl: (26) Failed to open/read local data from file/application\n").exit(
            26
        )
    headers = {}
    for header in values.get("H", []):
        name, _, value = header.partition(":")
        headers[name.strip().lower()] = value.strip()
    status = 0
    for url in options.urls:
        status = await _fetch(ctx, options, url, method, headers, body, result) or status
    return result.exit(status)


async def _fetch(
    ctx: Context,
    options: _Options,
    url: str,
    method: str,
    headers: dict[str, str],
    body: str | None,
    result: Result,
) -> int:
    """One URL: what curl prints for it, and its exit status (0: fine)."""
    flags, values = options.flags, options.values
    show_error = "S" in flags or "s" not in flags
    machine = ctx.machine
    started = machine.clock()
    reached, error, code = http.request(machine, method, url, headers, body)
    if isinstance(reached, http.Pending):
        reached, error, code = await _generated(reached, _max_time(values), machine.time_scale)
    elapsed = machine.clock() - started
    status = 0
    if error:
        status = code
        if show_error:
            result.err(f"curl: ({code}) {error}\n")
        http_code = "000"
    else:
        assert isinstance(reached, http.Response)
        http_code = f"{reached.status:03d}"
        if "f" in flags and reached.status >= 400:
            status = 22
            if show_error:
                result.err(f"curl: (22) The requested URL returned error: {reached.status}\n")
        else:
            if "i" in flags:
                result.out(reached.head())
            if (values.get("o") or [""])[-1] != "/dev/null":
                result.out(reached.body)
    writeout = (values.get("w") or [""])[-1]
    if writeout:
        result.out(_write_out(writeout, http_code, url, status, elapsed, result))
    return status


def _max_time(values: dict[str, list[str]]) -> float | None:
    try:
        return float(values["m"][-1]) if values.get("m") else None
    except ValueError:
        return None


async def _generated(
    pending: http.Pending, max_time: float | None, time_scale: float
) -> tuple[http.Response | None, str, int]:
    """Wait for a completion, as long as `-m` allows (host seconds: scaled like the host)."""
    try:
        response = await asyncio.wait_for(
            pending.complete(), None if max_time is None else max_time * time_scale
        )
    except TimeoutError:
        ms = int((max_time or 0) * 1000)
        return None, f"Operation timed out after {ms} milliseconds with 0 bytes received", 28
    if response is None:  # the server stopped while generating
        return None, "Empty reply from server", 52
    return response, "", 0


def _options(args: list[str]) -> _Options | Result:
    """The flags, the values of options that take one, the URLs; or the error curl exits with."""
    options = _Options()
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            key, eq, inline = arg.partition("=")
            if key in _VALUE_LONG:
                if eq:
                    value = inline
                elif i + 1 < len(args):
                    value = args[i + 1]
                    i += 1
                else:
                    return _usage(f"curl: option {key}: requires parameter\n")
                options.values.setdefault(_VALUE_LONG[key], []).append(value)
            elif key in _FLAG_LONG:
                options.flags.add(_FLAG_LONG[key])
            elif key == "--url" and i + 1 < len(args):
                options.urls.append(args[i + 1])
                i += 1
            else:
                return _usage(f"curl: option {key}: is unknown\n")
        elif arg.startswith("-") and len(arg) > 1:
            j = 1
            while j < len(arg):
                ch = arg[j]
                if ch in _VALUE_SHORT:
                    if j + 1 < len(arg):
                        value = arg[j + 1 :]
                    elif i + 1 < len(args):
                        value = args[i + 1]
                        i += 1
                    else:
                        return _usage(f"curl: option -{ch}: requires parameter\n")
                    options.values.setdefault(ch, []).append(value)
                    break
                if ch not in "sSfiLkv":
                    return _usage(f"curl: option -{ch}: is unknown\n")
                options.flags.add(ch)
                j += 1
        else:
            options.urls.append(arg)
        i += 1
    return options


def _usage(problem: str) -> Result:
    return Result().err(f"{problem}{_USAGE_HINT}").exit(2)


def _write_out(
    fmt: str, http_code: str, url: str, exit_code: int, elapsed: float, result: Result
) -> str:
    variables = {
        "http_code": http_code,
        "response_code": http_code,
        "url_effective": url,
        "url": url,
        "exitcode": str(exit_code),
        "time_total": f"{max(elapsed, 0.001843):.6f}",
        "time_connect": "0.000112",
        "size_download": "0",
    }
    out = []
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch == "\\" and i + 1 < len(fmt):
            nxt = fmt[i + 1]
            out.append({"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}.get(nxt, "\\" + nxt))
            i += 2
        elif ch == "%" and fmt.startswith("%%", i):
            out.append("%")
            i += 2
        elif ch == "%" and fmt.startswith("%{", i) and "}" in fmt[i:]:
            end = fmt.index("}", i)
            name = fmt[i + 2 : end]
            if name in variables:
                out.append(variables[name])
            else:
                result.err(f"curl: unknown --write-out variable: '{name}'\n")
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)
