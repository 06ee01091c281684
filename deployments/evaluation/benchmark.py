"""Serving benchmarks: one command per concurrency level, what each level measured, and how a
run compares with the revision's baseline. Pure: a profile's definition and the client's output
in, figures out.

The client is deployments.host_scripts.SERVING_BENCH, fed on stdin to the engine's own Python
on the host (hosts.engine_commands.bench_client). Its definitions follow `vllm bench serve`
(the script's docstring says where they differ). Every level must finish within one command's
time limit (JOB_COMMAND_TIMEOUT_SECONDS): each request is bounded by the client's --timeout,
and a duration-bound level by the duration plus that timeout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hosts import engine_commands

from ..host_scripts import BenchOutputError, BenchResult, parse_bench_output

# The stored figures of a level (Evaluation.results["levels"]). Schema 2 (the "schema" key):
# itl_ms is per chunk, as vllm bench serve reports ITL, and itl_per_token_ms is the gap of each
# chunk split over its tokens; the input length is recorded as asked and as sent. Schema 1
# (rows stored before, without the key) had only the per-token figure, under the name itl_ms:
# level_as_read moves it to itl_per_token_ms and leaves itl_ms unknown, so no page or API
# shows a per-token figure as a per-chunk one. Everything that reads stored levels reads them
# through level_as_read.
LEVEL_SCHEMA = 2
_UNKNOWN = {"p50": None, "p99": None}

# Below this share of the revision's own baseline, the verdict says the host serves slowly.
SLOW_RATIO = 0.9
# Time each command keeps for SSH and the client's start-up, beyond the requests themselves.
COMMAND_MARGIN_SECONDS = 5


def definition_of(params: dict[str, Any]) -> dict[str, Any] | None:
    """The benchmark a change asked for: its profile's definition, frozen in the change's
    parameters when it was requested (older changes stored only true or false: none)."""
    value = (params or {}).get("benchmark")
    return value if isinstance(value, dict) and value.get("concurrency_levels") else None


@dataclass(frozen=True)
class Level:
    concurrency: int
    argv: list[str]
    timeout: float  # the SSH command's limit


def levels(
    definition: dict[str, Any],
    *,
    engine_python: str,
    port: int,
    served_name: str,
    command_limit: float,
) -> list[Level]:
    """The commands of a run, one per concurrency level, each bounded by `command_limit`."""
    duration = definition.get("duration_seconds")
    if duration:
        duration = min(float(duration), command_limit / 2)
        request_timeout = max(1.0, command_limit - COMMAND_MARGIN_SECONDS - duration)
    else:
        request_timeout = max(1.0, command_limit - COMMAND_MARGIN_SECONDS)
    out = []
    for level in definition["concurrency_levels"]:
        per_stream = definition.get("requests_per_stream")
        argv = engine_commands.bench_client(
            engine_python,
            port=port,
            model=served_name,
            concurrency=level,
            input_tokens=definition["input_tokens"],
            output_tokens=definition["output_tokens"],
            timeout=request_timeout,
            num_requests=level * per_stream if not duration and per_stream else None,
            duration=duration or None,
            prompts=tuple(definition.get("prompts") or ()),
            endpoint=definition.get("endpoint") or "completions",
        )
        out.append(Level(level, argv, command_limit))
    return out


def level_result(concurrency: int, output: str) -> dict[str, Any]:
    """One level's figures as stored (and charted), or the reason there are none."""
    try:
        result = parse_bench_output(output)
    except BenchOutputError as exc:
        return {"concurrency": concurrency, "error": str(exc)}
    return level_figures(result)


def level_figures(result: BenchResult) -> dict[str, Any]:
    sent = result.input_tokens_sent
    return {
        "schema": LEVEL_SCHEMA,
        "concurrency": result.concurrency,
        "requests": result.requests,
        "completed": result.completed,
        "errors": result.errors,
        "duration_s": result.duration_s,
        "output_tok_s": result.output_tok_s,
        "total_tok_s": result.total_tok_s,
        "requests_s": result.requests_s,
        "input_tokens": result.input_tokens,
        "output_tokens": result.output_tokens,
        "input_tokens_asked": result.input_tokens_asked,
        "input_tokens_sent": {"mean": sent.mean, "min": sent.min, "max": sent.max},
        "input_counted_by": result.input_counted_by,
        "ttft_ms": {"p50": result.ttft_ms.p50, "p99": result.ttft_ms.p99},
        "itl_ms": {"p50": result.itl_ms.p50, "p99": result.itl_ms.p99},
        "itl_per_token_ms": {
            "p50": result.itl_per_token_ms.p50,
            "p99": result.itl_per_token_ms.p99,
        },
        "tpot_ms": {"mean": result.tpot_ms.mean},
        "error_samples": list(result.error_samples),
        "notes": list(result.notes),
    }


def level_as_read(level: dict[str, Any]) -> dict[str, Any]:
    """A stored level in today's schema (see LEVEL_SCHEMA): a schema-1 level's itl_ms was per
    token, so it becomes itl_per_token_ms and its per-chunk ITL is unknown (None)."""
    if "schema" in level or "error" in level:
        return level
    upgraded = {**level, "schema": 1, "itl_ms": dict(_UNKNOWN)}
    upgraded["itl_per_token_ms"] = level.get("itl_ms") or dict(_UNKNOWN)
    return upgraded


def levels_as_read(results: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A benchmark evaluation's levels, each through level_as_read."""
    return [level_as_read(level) for level in (results or {}).get("levels", [])]


def level_failed(level: dict[str, Any]) -> str | None:
    """Why a level does not count as passing (None: it does)."""
    if "error" in level:
        return str(level["error"])
    if level.get("errors"):
        samples = "; ".join(level.get("error_samples") or [])
        return f"{level['errors']} of {level['requests']} requests failed ({samples})"
    return None


def run_summary(results: list[dict[str, Any]], wanted: int) -> tuple[bool, str]:
    """(passed, one line): every level ran and no request failed."""
    problems = [
        f"at {r['concurrency']} concurrent: {why}" for r in results if (why := level_failed(r))
    ]
    if len(results) < wanted:
        problems.append(f"{wanted - len(results)} of {wanted} levels did not run")
    if problems:
        return False, "; ".join(problems)
    shown = ", ".join(f"{r['output_tok_s']:,.0f} tok/s at {r['concurrency']}" for r in results)
    return True, shown


def throughput_ratio(latest: dict[str, Any], baseline: dict[str, Any]) -> tuple[float, int] | None:
    """The lowest ratio of output tok/s between a run and the baseline over the concurrency
    levels both measured, with its level; None when they are not comparable (other lengths or
    prompts, no common level). The lowest, so a regression at any level shows."""
    same = ("input_tokens", "output_tokens", "prompts", "endpoint")
    profile, base_profile = latest.get("profile") or {}, baseline.get("profile") or {}
    if any(profile.get(k) != base_profile.get(k) for k in same):
        return None
    base = {
        r["concurrency"]: r["output_tok_s"]
        for r in baseline.get("levels", [])
        if not level_failed(r) and r.get("output_tok_s")
    }
    ratios = [
        (r["output_tok_s"] / base[r["concurrency"]], r["concurrency"])
        for r in latest.get("levels", [])
        if not level_failed(r) and r["concurrency"] in base
    ]
    return min(ratios) if ratios else None
