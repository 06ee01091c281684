"""curl's output, and what the inference server's endpoints answer."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from ..commands import HTTP_MARK
from .common import (
    HttpResult,
    ParseError,
    excerpt,
)

# --- HTTP (curl) ---------------------------------------------------------------------------

_HTTP_TRAILER_RE = re.compile(re.escape(HTTP_MARK) + r"([0-9]{3})")
_CURL_ERROR_RE = re.compile(r"curl: \(\d+\) .*")


def parse_http(text: str) -> HttpResult:
    """Split curl's `@@cp:http:<code>` trailer (added by `-w`) off the body.

    curl writes its error line to stderr, which lands before or after the buffered body, so it
    is looked for on a line of its own anywhere and taken out of the body. `000` means no
    response: status None and the curl error in `error`. No trailer at all: output cut short.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    for marker in range(len(lines) - 1, -1, -1):
        trailer = _HTTP_TRAILER_RE.fullmatch(lines[marker])
        if trailer:
            break
    else:
        return HttpResult(body=text, status=None, error="truncated")
    code = int(trailer.group(1))
    errors = [line for line in lines if _CURL_ERROR_RE.fullmatch(line)]
    # Joining drops the `\n` that -w writes before the trailer, so the body is byte-exact.
    body = "\n".join(line for line in lines[:marker] if not _CURL_ERROR_RE.fullmatch(line))
    error = excerpt(errors[-1]) if errors else None
    if code == 0:
        return HttpResult(body=body, status=None, error=error or "no HTTP response")
    return HttpResult(body=body, status=code, error=error)


# --- server endpoints ----------------------------------------------------------------------


def _load_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"{what} is not JSON ({exc}): {excerpt(text, 120)!r}") from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_models_json(body: str) -> tuple[list[str], list[str], int | None]:
    """Served ids, their roots and the context length from an OpenAI-style `/v1/models`.

    vLLM and SGLang both answer `{"object": "list", "data": [{"id": ..., "root": ...,
    "max_model_len": ...}]}`; root and max_model_len may be absent (older SGLang, LoRA cards).
    max_model_len is the first one given, i.e. the base model's.
    """
    payload = _load_json(body, "/v1/models")
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise ParseError(f"/v1/models has no 'data' list: {excerpt(body, 120)!r}")
    ids: list[str] = []
    roots: list[str] = []
    max_model_len: int | None = None
    for card in data:
        if not isinstance(card, dict) or not isinstance(card.get("id"), str):
            raise ParseError(f"/v1/models entry without a string 'id': {excerpt(str(card))!r}")
        ids.append(card["id"])
        root, length = card.get("root"), card.get("max_model_len")
        if root is not None and not isinstance(root, str):
            raise ParseError(f"/v1/models 'root' is not a string: {root!r}")
        if length is not None and not _is_int(length):
            raise ParseError(f"/v1/models 'max_model_len' is not an integer: {length!r}")
        if root:
            roots.append(root)
        if max_model_len is None and length is not None:
            max_model_len = length
    return ids, roots, max_model_len


_METRIC_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE_RE = re.compile(
    rf"({_METRIC_NAME})"
    r'(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?'  # labels; quoted values may hold } and \"
    r"[ \t]+(\S+)(?:[ \t]+-?\d+)?[ \t]*"  # value, optional timestamp
)
_NAME_START_RE = re.compile(_METRIC_NAME)
RUNNING_METRICS = ("vllm:num_requests_running", "sglang:num_running_reqs")
WAITING_METRICS = ("vllm:num_requests_waiting", "sglang:num_queue_reqs")
KV_CACHE_METRICS = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")
GENERATION_METRICS = ("vllm:generation_tokens_total", "sglang:generation_tokens_total")
_WANTED = frozenset(RUNNING_METRICS + WAITING_METRICS + KV_CACHE_METRICS)


def _metric_samples(text: str, wanted: frozenset[str] = _WANTED) -> dict[str, list[float]]:
    """Values of the wanted metrics, one per label set.

    A small strict line parser rather than prometheus_client (not a declared dependency, and
    one cut-off line makes its parser reject the whole page). A malformed line of a metric we
    use raises, since dropping it would make a sum silently wrong; other lines are skipped.
    """
    samples: dict[str, list[float]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        start = _NAME_START_RE.match(line)
        if not start or start.group(0) not in wanted:
            continue
        match = _SAMPLE_RE.fullmatch(line)
        try:
            value = float(match.group(3)) if match else None
        except ValueError:
            value = None
        if value is None:
            raise ParseError(f"malformed metric line: {excerpt(line, 160)!r}")
        samples.setdefault(start.group(0), []).append(value)
    return samples


def _first_family(samples: dict[str, list[float]], names: Sequence[str]) -> list[float] | None:
    """Finite values of the first metric present; NaN and ±Inf say nothing about load."""
    for name in names:
        if name in samples:
            values = [v for v in samples[name] if math.isfinite(v)]
            return values or None
    return None


def parse_vllm_metrics(text: str) -> tuple[float | None, float | None, float | None]:
    """(requests running, requests waiting, KV-cache usage 0..1) from Prometheus text.

    Request counts are summed over label sets (data-parallel engines, several models). KV-cache
    usage is a fraction per engine, so it is averaged instead: a sum could exceed 1. Newer vLLM
    names are preferred over older ones; SGLang's names are accepted. Missing metric: None.
    """
    samples = _metric_samples(text)
    running = _first_family(samples, RUNNING_METRICS)
    waiting = _first_family(samples, WAITING_METRICS)
    kv_cache = _first_family(samples, KV_CACHE_METRICS)
    return (
        None if running is None else sum(running),
        None if waiting is None else sum(waiting),
        None if kv_cache is None else sum(kv_cache) / len(kv_cache),
    )


def parse_generation_tokens(text: str) -> float | None:
    """Tokens generated since the server started, summed over engines (None: not exposed)."""
    found = _first_family(_metric_samples(text, frozenset(GENERATION_METRICS)), GENERATION_METRICS)
    return None if found is None else sum(found)
