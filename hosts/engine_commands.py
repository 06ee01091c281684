"""What change jobs send to evaluate and repair an inference engine, beyond the probe: a chat
completion, the serving benchmark client, and a reinstall of the engine's package.

Built like everything in hosts.commands: from validated parts, each passed through
`shlex.quote` when the line is joined (a sibling module only to keep each under 400 lines).
"""

from __future__ import annotations

import re

from . import validators
from .commands import HTTP_MARK, UnsafeCommand, check_path, check_port, curl_auth_config

# A PEP 440 version as pip prints it, local part included (0.11.2, 0.11.2+cu128, 1.0rc1).
VERSION_RE = r"^[0-9][A-Za-z0-9.+!_-]{0,63}$"
MAX_LEVEL = 512
MAX_PROMPTS = 16
MAX_PROMPT_CHARS = 4000


def _int(value: int, low: int, high: int, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UnsafeCommand(f"refusing {what} {value!r} (allowed {low}..{high})")
    return str(value)


def _seconds(value: float, high: float, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= high:
        raise UnsafeCommand(f"refusing {what} {value!r}")
    return f"{float(value):g}"


ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


def api_request(
    port: int, endpoint: str, *, max_seconds: int = 55, authenticated: bool = False
) -> list[str]:
    """POST the JSON body sent on stdin to the server's /v1/completions or /v1/chat/completions
    (stdin rather than an argument: a long-context prompt would not fit on a command line, and
    the prompt stays out of `ps`). Like hosts.commands.completion_request, it prints the HTTP
    status after the body. `authenticated`: stdin is a curl config instead (`-K -`), carrying
    the API key's header and the body (api_request_stdin), so the key stays off the command
    line too."""
    if endpoint not in ENDPOINTS:
        raise UnsafeCommand(f"refusing endpoint {endpoint!r}")
    return [
        "curl",
        "-sS",
        "-m",
        _int(max_seconds, 1, 3600, "curl time limit"),
        "-w",
        f"\\n{HTTP_MARK}%{{http_code}}\\n",
        "-H",
        "Content-Type: application/json",
        *(["-K", "-"] if authenticated else ["--data-binary", "@-"]),
        f"http://127.0.0.1:{check_port(port)}{ENDPOINTS[endpoint]}",
    ]


# curl reads a config line of at most 100 KiB (MAX_CONFIG_LINE_LENGTH in src/tool_parsecfg.c).
MAX_CONFIG_BODY_CHARS = 100 * 1024 - 64


def api_request_stdin(body: str, api_key: str | None) -> str:
    """What api_request reads on stdin: the JSON body itself, or, for a server that takes a
    key, a curl config with the key's header and the body (quoted as curl's config reader
    unquotes: backslash, double quote and the control characters it knows)."""
    if api_key is None:
        return body
    if not body.startswith(("{", "[")):  # `data-binary = "@..."` would read a file
        raise UnsafeCommand("refusing a request body that is not JSON")
    quoted = (
        body.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )
    if len(quoted) > MAX_CONFIG_BODY_CHARS:
        raise UnsafeCommand(
            f"a request of {len(quoted):,} characters is too long to send with an API key "
            f"(curl reads at most {MAX_CONFIG_BODY_CHARS:,} from a config line)"
        )
    return f'{curl_auth_config(api_key)}data-binary = "{quoted}"\n'


def chat_completion_request(port: int, *, max_seconds: int = 55) -> list[str]:
    """A chat completion (messages in the JSON body on stdin)."""
    return api_request(port, "chat", max_seconds=max_seconds)


def bench_client(
    engine_python: str,
    *,
    port: int,
    model: str,
    concurrency: int,
    input_tokens: int,
    output_tokens: int,
    timeout: float,
    num_requests: int | None = None,
    duration: float | None = None,
    prompts: tuple[str, ...] = (),
    endpoint: str = "completions",
    seed: int = 0,
    api_key_env: str = "",
) -> list[str]:
    """The serving benchmark client (deployments.host_scripts.SERVING_BENCH, sent on stdin) run
    by the engine's own Python against its server on the host's loopback. No sudo: it only opens
    connections to 127.0.0.1. Exactly one of `num_requests` and `duration` bounds the run."""
    if (num_requests is None) == (duration is None):
        raise UnsafeCommand("give the benchmark either a number of requests or a duration")
    if endpoint not in {"completions", "chat"}:
        raise UnsafeCommand(f"refusing benchmark endpoint {endpoint!r}")
    if not isinstance(model, str) or not re.fullmatch(validators.SERVED_NAME_RE, model):
        raise UnsafeCommand(f"refusing to send model name {model!r}")
    argv = [
        check_path(engine_python),
        "-I",  # isolated: no user site-packages, no PYTHON* variables, no script directory
        "-",
        "--url",
        f"http://127.0.0.1:{check_port(port)}",
        "--model",
        model,
        "--endpoint",
        endpoint,
        "--concurrency",
        _int(concurrency, 1, MAX_LEVEL, "concurrency"),
        "--input-tokens",
        _int(input_tokens, 1, 1_000_000, "input length"),
        "--output-tokens",
        _int(output_tokens, 1, 1_000_000, "output length"),
        "--ignore-eos",
        "--seed",
        _int(seed, 0, 2**31, "seed"),
        "--timeout",
        _seconds(timeout, 3600, "request timeout"),
    ]
    if num_requests is not None:
        argv += ["--num-requests", _int(num_requests, 1, 100_000, "number of requests")]
    else:
        argv += ["--duration", _seconds(duration or 0, 3600, "duration")]
    argv += _prompt_args(prompts)
    if api_key_env:  # the key stays in the environment: on the command line `ps` shows it
        argv += ["--api-key-env", _check(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$", api_key_env, "name")]
    return argv


def _prompt_args(prompts: tuple[str, ...]) -> list[str]:
    """A fixed prompt set, one `--prompt` each (quoted when the line is joined)."""
    if len(prompts) > MAX_PROMPTS:
        raise UnsafeCommand(f"refusing more than {MAX_PROMPTS} prompts")
    out = []
    for prompt in prompts:
        if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > MAX_PROMPT_CHARS:
            raise UnsafeCommand("refusing an empty or over-long prompt")
        if "\x00" in prompt:
            raise UnsafeCommand("refusing a prompt with a NUL byte")
        out += ["--prompt", prompt]
    return out


def pip_reinstall(
    engine_python: str, dist: str, version: str, *, find_links: str = ""
) -> list[str]:
    """Reinstall exactly `dist==version` over itself with the engine's own pip, without touching
    its dependencies: from the index pip is configured with, or (`find_links`) only from a wheel
    directory on the host. Runs as root (hosts.services.remote.command_line_for adds `sudo -n`):
    the engine's virtual environment is root's."""
    dist = _check(validators.DIST_NAME_RE, dist, "distribution name")
    version = _check(VERSION_RE, version, "version")
    source = ["--no-index", "--find-links", check_path(find_links)] if find_links else []
    return [
        check_path(engine_python),
        "-m",
        "pip",
        "install",
        "--force-reinstall",
        "--no-deps",
        "--disable-pip-version-check",
        "--root-user-action=ignore",
        *source,
        f"{dist}=={version}",
    ]


def is_pip_install(argv: list[str]) -> bool:
    """`<python> -m pip install ...`: the one interpreter command that needs root."""
    return argv[1:4] == ["-m", "pip", "install"]


def _check(pattern: str, value: str, what: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(pattern, value):
        raise UnsafeCommand(f"refusing to send {what} {value!r}")
    return value
