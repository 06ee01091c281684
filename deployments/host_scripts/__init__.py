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

from .bench_output import (
    BenchOutputError,
    BenchResult,
    LatencyStats,
    TokenCounts,
    parse_bench_output,
)

SERVING_BENCH: str = resources.files(__name__).joinpath("serving_bench.py").read_text("utf-8")


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
]
