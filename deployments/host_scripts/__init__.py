"""Scripts the product sends to GPU hosts, and what it makes of their output.

The scripts run on the hosts with the engine's own Python, fed on stdin (`python3 -I -`), so
they use the standard library only and run on Python 3.9 and later; they are text here, never
imported. `SERVING_BENCH` is the serving benchmark client (`serving_bench.py`, its docstring
says what it measures and how); `serving_bench_argv` builds its command line and
`parse_bench_output` reads what it printed.
"""

from __future__ import annotations

from importlib import resources

from hosts import engine_commands
from hosts.commands import UnsafeCommand

from .bench_output import (
    BenchOutputError,
    BenchResult,
    LatencyStats,
    TokenCounts,
    parse_bench_output,
)

SERVING_BENCH: str = resources.files(__name__).joinpath("serving_bench.py").read_text("utf-8")
_KEY_LINE = 'API_KEY = ""\n'


def serving_bench_source(api_key: str | None) -> str:
    """The benchmark client as sent on stdin: with a key, its `API_KEY` line set to it, so the
    key reaches the host inside the script (stdin), never on a command line."""
    if api_key is None:
        return SERVING_BENCH
    if not api_key or any(ord(c) < 0x20 or ord(c) == 0x7F for c in api_key):
        raise UnsafeCommand("refusing an API key that cannot be a header value")
    if SERVING_BENCH.count(_KEY_LINE) != 1:
        raise RuntimeError("serving_bench.py must have exactly one API_KEY line")
    return SERVING_BENCH.replace(_KEY_LINE, f"API_KEY = {api_key!r}\n")


def serving_bench_argv(
    engine_python: str,
    *,
    port: int,
    model: str,
    concurrency: int,
    num_requests: int,
    input_tokens: int,
    output_tokens: int,
    endpoint: str = "completions",
    api_key_env: str = "",
    seed: int = 0,
    timeout: float = 120.0,
) -> list[str]:
    """The command that runs SERVING_BENCH (sent on stdin) against the host's own server, built
    by hosts.engine_commands.bench_client from validated parts.

    No sudo: the client only opens a connection to the server on the host's loopback.
    """
    return engine_commands.bench_client(
        engine_python,
        port=port,
        model=model,
        concurrency=concurrency,
        num_requests=num_requests,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        endpoint=endpoint,
        seed=seed,
        timeout=timeout,
        api_key_env=api_key_env,
    )


__all__ = [
    "SERVING_BENCH",
    "BenchOutputError",
    "BenchResult",
    "LatencyStats",
    "TokenCounts",
    "parse_bench_output",
    "serving_bench_argv",
    "serving_bench_source",
]
