"""Reading what serving_bench.py printed: one JSON object, checked field by field.

Pure and strict: the output crossed an SSH connection from a host, so anything short of the
exact shape (truncated, garbage, a field missing or of the wrong type, counts that do not add
up) is a BenchOutputError saying what was wrong, never a half-filled result.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

# 2: itl_ms is per chunk as vllm bench serve reports it, itl_per_token_ms what itl_ms was in 1;
# the input length asked, sent and how it was counted; notes. The client is sent with every run,
# so only its own version is read; stored figures of version 1 are read by
# deployments.evaluation.benchmark.level_as_read.
OUTPUT_VERSION = 2
_STATS = ("ttft_ms", "itl_ms", "itl_per_token_ms", "tpot_ms", "e2el_ms")
_COUNTS = ("concurrency", "requests", "completed", "errors", "output_tokens", "input_tokens")
_RATES = ("duration_s", "output_tok_s", "total_tok_s", "requests_s")
_INPUT = ("input_tokens_asked", "input_tokens_sent", "input_counted_by")
COUNTED_BY = frozenset({"tokenize", "words", "prompts"})
_FIELDS = frozenset(
    {"ok", "version", *_COUNTS, *_RATES, *_STATS, *_INPUT, "error_samples", "notes"}
)


class BenchOutputError(ValueError):
    """The benchmark's output cannot be trusted; the message says why."""


@dataclass(frozen=True)
class LatencyStats:
    """Milliseconds; None when no request gave a sample (e.g. every request failed)."""

    mean: float | None
    p50: float | None
    p99: float | None


@dataclass(frozen=True)
class TokenCounts:
    """A prompt length per completed request; None when no request completed."""

    mean: float | None
    min: int | None
    max: int | None


@dataclass(frozen=True)
class BenchResult:
    concurrency: int
    requests: int
    completed: int
    errors: int
    duration_s: float
    output_tokens: int
    input_tokens: int
    input_tokens_asked: int | None  # per request; None for a fixed prompt set
    input_tokens_sent: TokenCounts  # per request, as the server counted them
    input_counted_by: str  # "tokenize", "words" (no /tokenize) or "prompts" (a fixed set)
    output_tok_s: float
    total_tok_s: float
    requests_s: float
    ttft_ms: LatencyStats
    itl_ms: LatencyStats  # per chunk: vllm bench serve's ITL
    itl_per_token_ms: LatencyStats
    tpot_ms: LatencyStats
    e2el_ms: LatencyStats
    error_samples: tuple[str, ...]
    notes: tuple[str, ...] = ()


def _shown(text: str) -> str:
    return repr(text[:120]) + ("..." if len(text) > 120 else "")


def _load(text: str) -> dict[str, Any]:
    stripped = text.strip()
    if not stripped:
        raise BenchOutputError("the benchmark printed nothing")
    if "\n" in stripped:
        raise BenchOutputError(f"expected one JSON line, got {stripped.count(chr(10)) + 1} lines")
    try:
        payload = json.loads(stripped, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        cut = stripped.startswith("{") and not stripped.endswith("}")
        where = "truncated" if cut else f"invalid at char {exc.pos}"
        raise BenchOutputError(
            f"benchmark output is not JSON ({where}): {_shown(stripped)}"
        ) from exc
    if not isinstance(payload, dict):
        raise BenchOutputError(f"benchmark output is not a JSON object: {_shown(stripped)}")
    return payload


def _refuse_constant(name: str) -> float:
    raise BenchOutputError(f"benchmark output holds {name}, which is not a number")


def _count(payload: dict[str, Any], key: str) -> int:
    value = payload[key]
    if type(value) is not int or value < 0:
        raise BenchOutputError(f"{key} must be a non-negative integer, got {value!r}")
    return value


def _number(value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BenchOutputError(f"{key} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise BenchOutputError(f"{key} must be finite and non-negative, got {value!r}")
    return float(value)


def _stats(payload: dict[str, Any], key: str) -> LatencyStats:
    value = payload[key]
    if not isinstance(value, dict) or set(value) != {"mean", "p50", "p99"}:
        raise BenchOutputError(f"{key} must be an object with mean, p50 and p99, got {value!r}")
    parts = {k: None if v is None else _number(v, f"{key}.{k}") for k, v in value.items()}
    if sum(v is None for v in parts.values()) not in (0, 3):
        raise BenchOutputError(f"{key} is missing values: {value!r}")
    return LatencyStats(parts["mean"], parts["p50"], parts["p99"])


def _strings(payload: dict[str, Any], key: str) -> tuple[str, ...]:
    samples = payload[key]
    if not isinstance(samples, list) or len(samples) > 5:
        raise BenchOutputError(f"{key} must be a list of at most 5, got {samples!r}")
    if not all(isinstance(s, str) for s in samples):
        raise BenchOutputError(f"{key} must hold strings")
    return tuple(samples)


def _input(payload: dict[str, Any], completed: int) -> tuple[int | None, TokenCounts, str]:
    asked = payload["input_tokens_asked"]
    if asked is not None and (type(asked) is not int or asked < 1):
        raise BenchOutputError(f"input_tokens_asked must be a positive integer, got {asked!r}")
    sent = payload["input_tokens_sent"]
    if not isinstance(sent, dict) or set(sent) != {"mean", "min", "max"}:
        raise BenchOutputError(f"input_tokens_sent must have mean, min and max, got {sent!r}")
    missing = [v is None for v in sent.values()]
    if any(missing) != all(missing) or all(missing) != (completed == 0):
        raise BenchOutputError(f"input_tokens_sent does not match {completed} completed requests")
    low, high = sent["min"], sent["max"]
    if completed and (type(low) is not int or type(high) is not int or not 0 <= low <= high):
        raise BenchOutputError(f"input_tokens_sent min and max must be counts, got {sent!r}")
    mean = None if sent["mean"] is None else _number(sent["mean"], "input_tokens_sent.mean")
    by = payload["input_counted_by"]
    if by not in COUNTED_BY:
        raise BenchOutputError(f"input_counted_by must be one of {sorted(COUNTED_BY)}, got {by!r}")
    return asked, TokenCounts(mean, low, high), by


def parse_bench_output(text: str) -> BenchResult:
    """The result serving_bench.py printed on stdout; BenchOutputError if it is not exactly that."""
    payload = _load(text)
    if payload.get("ok") is False:
        raise BenchOutputError(f"the benchmark failed: {str(payload.get('error'))[:200]}")
    if payload.get("ok") is not True:
        raise BenchOutputError(f"ok must be true or false, got {payload.get('ok')!r}")
    if payload.get("version") != OUTPUT_VERSION:
        raise BenchOutputError(f"unknown output version {payload.get('version')!r}")
    missing = sorted(_FIELDS - set(payload))
    if missing:
        raise BenchOutputError(f"benchmark output lacks {', '.join(missing)}")
    unknown = sorted(set(payload) - _FIELDS)
    if unknown:
        raise BenchOutputError(f"benchmark output has unknown fields {', '.join(unknown)}")
    counts = {key: _count(payload, key) for key in _COUNTS}
    rates = {key: _number(payload[key], key) for key in _RATES}
    if counts["completed"] + counts["errors"] != counts["requests"]:
        raise BenchOutputError("completed and errors do not add up to requests")
    if counts["concurrency"] < 1:
        raise BenchOutputError("concurrency must be at least 1")
    stats = {key: _stats(payload, key) for key in _STATS}
    for key in ("ttft_ms", "e2el_ms"):  # every completed request has these two
        if (stats[key].mean is None) != (counts["completed"] == 0):
            raise BenchOutputError(f"{key} does not match {counts['completed']} completed requests")
    samples = _strings(payload, "error_samples")
    asked, sent, counted_by = _input(payload, counts["completed"])
    if counts["errors"] and not samples:
        raise BenchOutputError("errors were counted but no error sample was given")
    return BenchResult(
        concurrency=counts["concurrency"],
        requests=counts["requests"],
        completed=counts["completed"],
        errors=counts["errors"],
        duration_s=rates["duration_s"],
        output_tokens=counts["output_tokens"],
        input_tokens=counts["input_tokens"],
        input_tokens_asked=asked,
        input_tokens_sent=sent,
        input_counted_by=counted_by,
        output_tok_s=rates["output_tok_s"],
        total_tok_s=rates["total_tok_s"],
        requests_s=rates["requests_s"],
        ttft_ms=stats["ttft_ms"],
        itl_ms=stats["itl_ms"],
        itl_per_token_ms=stats["itl_per_token_ms"],
        tpot_ms=stats["tpot_ms"],
        e2el_ms=stats["e2el_ms"],
        error_samples=samples,
        notes=_strings(payload, "notes"),
    )
