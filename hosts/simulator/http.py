"""vLLM's OpenAI-compatible HTTP API as `curl` on the host sees it.

Only what the control plane and an operator reach for: /health, /v1/models, /metrics,
/version, and /v1/completions (plus chat) with answers coherent enough for a smoke test.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass
from email.utils import formatdate
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from . import catalog

if TYPE_CHECKING:
    from .state import Machine, Run, Unit

LOCAL_HOSTS = {"127.0.0.1", "localhost", "0.0.0.0", "::1", "[::1]"}  # noqa: S104 - a URL, not a bind

_STATUS_TEXT = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
}


@dataclass
class Response:
    status: int
    body: str = ""
    content_type: str = "application/json"

    def head(self) -> str:
        return (
            f"HTTP/1.1 {self.status} {_STATUS_TEXT.get(self.status, '')}\r\n"
            f"date: {formatdate(usegmt=True)}\r\n"
            "server: uvicorn\r\n"
            f"content-length: {len(self.body.encode())}\r\n"
            f"content-type: {self.content_type}\r\n"
            "\r\n"
        )


def _json(status: int, payload: Any) -> Response:
    return Response(status, json.dumps(payload, separators=(",", ":"), ensure_ascii=False))


def _error(status: int, message: str, kind: str, param: str | None = None) -> Response:
    return _json(
        status, {"error": {"message": message, "type": kind, "param": param, "code": status}}
    )


def request(
    machine: Machine, method: str, url: str, headers: dict[str, str], body: str | None
) -> tuple[Response | None, str, int]:
    """One HTTP exchange: (response, "", 0) or (None, curl's error text, curl's exit code)."""
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None, "URL rejected: Port number was not a decimal number between 0 and 65535", 3
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https"):
        return None, f'Protocol "{parts.scheme}" not supported', 1
    refused = (
        None,
        f"Failed to connect to {host} port {port} after 0 ms: Couldn't connect to server",
        7,
    )
    if host not in LOCAL_HOSTS and not machine.binds_address(host):
        if re.fullmatch(r"[0-9.]+", host):
            return (
                None,
                f"Failed to connect to {host} port {port} after 5002 ms: Timeout was reached",
                28,
            )
        return None, f"Could not resolve host: {host}", 6
    # A server answers only on the addresses it bound (--host), and not at all on --uds or
    # --headless: curl then finds the port closed.
    served = machine.server_at(host, port)
    if served is None:
        return refused
    unit, run = served
    if parts.scheme == "https":
        return None, "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to localhost:443 ", 35
    return handle(machine, unit, run, method, parts.path or "/", body, headers), "", 0


def _authorized(run: Run, path: str, headers: dict[str, str]) -> bool:
    """vLLM's --api-key check: only /v1 routes need `Authorization: Bearer KEY`."""
    engine = run.engine
    if engine is None or not engine.api_key_sha256 or not path.startswith("/v1"):
        return True
    scheme, _, token = headers.get("authorization", "").partition(" ")
    digest = hashlib.sha256(token.strip().encode()).hexdigest()
    return scheme.lower() == "bearer" and digest in engine.api_key_sha256


def handle(
    machine: Machine,
    unit: Unit,
    run: Run,
    method: str,
    path: str,
    body: str | None,
    headers: dict[str, str] | None = None,
) -> Response:
    engine = run.engine
    assert engine is not None
    if not _authorized(run, path, headers or {}):
        return _json(401, {"error": "Unauthorized"})
    routes = {
        "/health": ("GET",),
        "/v1/models": ("GET",),
        "/metrics": ("GET",),
        "/version": ("GET",),
        "/v1/completions": ("POST",),
        "/v1/chat/completions": ("POST",),
    }
    if path not in routes:
        return _json(404, {"detail": "Not Found"})
    if method not in routes[path]:
        return _json(405, {"detail": "Method Not Allowed"})
    if path == "/health":
        return Response(200, "", "application/json")
    if path == "/version":
        return _json(200, {"version": catalog.VLLM_VERSION})
    if path == "/v1/models":
        return _json(200, _models(machine, run))
    if path == "/metrics":
        return Response(200, metrics(machine, run), "text/plain; version=0.0.4; charset=utf-8")
    return _completion(machine, run, body, chat=path.endswith("chat/completions"))


def _models(machine: Machine, run: Run) -> dict[str, Any]:
    engine = run.engine
    assert engine is not None
    created = int(time.time())
    return {
        "object": "list",
        "data": [  # one card per --served-model-name, all the same model
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": engine.model_path,
                "parent": None,
                "max_model_len": machine.max_model_len(engine),
                "permission": [
                    {
                        "id": f"modelperm-{uuid.UUID(int=machine.rng.getrandbits(128)).hex}",
                        "object": "model_permission",
                        "created": created,
                        "allow_create_engine": False,
                        "allow_sampling": True,
                        "allow_logprobs": True,
                        "allow_search_indices": False,
                        "allow_view": True,
                        "allow_fine_tuning": False,
                        "organization": "*",
                        "group": None,
                        "is_blocking": False,
                    }
                ],
            }
            for name in engine.served_names or (engine.served_name,)
        ],
    }


def _num(value: float) -> str:
    """Sample values the way prometheus_client prints them (its floatToGoString)."""
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def metrics(machine: Machine, run: Run) -> str:
    engine = run.engine
    assert engine is not None
    labels = f'engine="0",model_name="{engine.served_name}"'
    start = run.started_wall
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[str, str, float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for sample, extra, value in samples:
            lab = labels + (f",{extra}" if extra else "")
            lines.append(f"{sample}{{{lab}}} {_num(value)}")

    lines += [
        "# HELP python_gc_objects_collected_total Objects collected during gc",
        "# TYPE python_gc_objects_collected_total counter",
        'python_gc_objects_collected_total{generation="0"} 21734.0',
        'python_gc_objects_collected_total{generation="1"} 4123.0',
        'python_gc_objects_collected_total{generation="2"} 872.0',
        "# HELP process_resident_memory_bytes Resident memory size in bytes.",
        "# TYPE process_resident_memory_bytes gauge",
        f"process_resident_memory_bytes {_num(3412152320.0)}",
        "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
        "# TYPE process_start_time_seconds gauge",
        f"process_start_time_seconds {_num(round(start, 2))}",
    ]
    running, waiting = machine.inflight_running, machine.inflight_waiting
    family(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        [("vllm:num_requests_running", "", running)],
    )
    family(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        [("vllm:num_requests_waiting", "", waiting)],
    )
    family(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        [("vllm:kv_cache_usage_perc", "", machine.kv_cache_usage())],
    )
    queries = float(run.prompt_tokens)
    family(
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        [
            ("vllm:prefix_cache_queries_total", "", queries),
            ("vllm:prefix_cache_queries_created", "", start),
        ],
    )
    family(
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        [
            ("vllm:prefix_cache_hits_total", "", float(int(queries * 0.4))),
            ("vllm:prefix_cache_hits_created", "", start),
        ],
    )
    family(
        "vllm:num_preemptions_total",
        "counter",
        "Cumulative number of preemption from the engine.",
        [("vllm:num_preemptions_total", "", 0.0), ("vllm:num_preemptions_created", "", start)],
    )
    family(
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        [
            ("vllm:prompt_tokens_total", "", float(run.prompt_tokens)),
            ("vllm:prompt_tokens_created", "", start),
        ],
    )
    family(
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        [
            ("vllm:generation_tokens_total", "", float(run.generation_tokens)),
            ("vllm:generation_tokens_created", "", start),
        ],
    )
    success = []
    for reason in ("abort", "length", "stop"):
        extra = f'finished_reason="{reason}"'
        success.append(("vllm:request_success_total", extra, float(run.finished.get(reason, 0))))
        success.append(("vllm:request_success_created", extra, start))
    family(
        "vllm:request_success_total",
        "counter",
        "Count of successfully processed requests.",
        success,
    )
    lines.append(
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        "# TYPE vllm:cache_config_info gauge\n"
        f'vllm:cache_config_info{{block_size="64",cache_dtype="auto",'
        f'engine="0",gpu_memory_utilization="{engine.gpu_memory_utilization}",'
        f'num_gpu_blocks="{max(1, int((run.budget_mib - run.weights_mib) / 4))}",'
        f'prefix_caching_hash_algo="sha256",swap_space="4"}} 1.0'
    )
    return "\n".join(lines) + "\n"


# --- completions ---------------------------------------------------------------------------

_ANSWERS: tuple[tuple[str, str], ...] = (
    (
        "capital of france",
        " Paris. It is the largest city in France and has been the country's political, "
        "economic and cultural centre for centuries, home to the Louvre and the Eiffel Tower.",
    ),
    (
        "capital of germany",
        " Berlin, a city of about 3.7 million people on the river Spree, which became the "
        "capital of reunified Germany in 1990.",
    ),
    (
        "capital of japan",
        " Tokyo, the seat of the Emperor and the national government and one of the most "
        "populous metropolitan areas in the world.",
    ),
    (
        "capital of italy",
        " Rome, which was the centre of the Roman Empire and is home to Vatican City.",
    ),
    ("2 + 2", " 4. Adding two and two gives four, one of the first sums children learn."),
    ("2+2", " 4."),
    (
        "the sky is",
        " blue on a clear day because air molecules scatter the shorter blue wavelengths of "
        "sunlight more strongly than the red ones.",
    ),
    ("hello", " Hello! How can I help you today?"),
)
_GENERIC = (
    " a question that comes up often, and the short answer is that it depends on the context. "
    "In most cases the best approach is to start from the basics, check the assumptions, and "
    "then look at the details one step at a time."
)
_SYLLABLES = ("blor", "quint", "zeph", "mork", "trab", "fenu", "glox", "vrim", "snet", "wex", "olt")


def _tokens(text: str) -> list[str]:
    return re.findall(r"\s*[\w']+|\s*[^\w\s]", text)


def _continuation(prompt: str, incoherent: bool) -> str:
    if incoherent:
        seed = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:8], "big")
        words = []
        for k in range(40):
            a = _SYLLABLES[(seed >> (k % 50)) % len(_SYLLABLES)]
            b = _SYLLABLES[(seed // (k + 3)) % len(_SYLLABLES)]
            words.append(a + ("-" if k % 4 == 1 else "") + b)
            seed = (seed * 6364136223846793005 + 1442695040888963407) % 2**64
        return " " + " ".join(words)
    norm = " ".join(prompt.lower().split())
    for key, answer in _ANSWERS:
        if key in norm:
            return answer
    return _GENERIC


def _completion(machine: Machine, run: Run, body: str | None, *, chat: bool) -> Response:
    engine = run.engine
    assert engine is not None
    try:
        payload = json.loads(body or "")
    except ValueError:
        return _error(400, "JSON decode error", "BadRequestError")
    if not isinstance(payload, dict):
        return _error(400, "Input should be a valid dictionary", "BadRequestError")
    model = payload.get("model")
    if model is not None and model not in (engine.served_names or (engine.served_name,)):
        return _error(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
    if chat:
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "Field required: messages", "BadRequestError")
        prompt = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    else:
        raw = payload.get("prompt")
        if isinstance(raw, list) and raw and all(isinstance(p, str) for p in raw):
            raw = raw[0]
        if not isinstance(raw, str) or not raw:
            return _error(
                400,
                "Either prompt or prompt_embeds must be provided and non-empty.",
                "BadRequestError",
            )
        prompt = raw
    max_tokens = payload.get("max_tokens", payload.get("max_completion_tokens"))
    if max_tokens is None:
        max_tokens = 16 if not chat else 256
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return _error(400, f"max_tokens must be at least 1, got {max_tokens}.", "BadRequestError")
    # `--load-format dummy` serves random weights: as coherent as the incoherent fault.
    incoherent = machine.fault_applies("incoherent", engine.model_path)
    pieces = _tokens(_continuation(prompt, incoherent or engine.load_format == "dummy"))
    text = "".join(pieces[:max_tokens])
    reason = "length" if len(pieces) > max_tokens else "stop"
    if chat:
        text = text.lstrip()
    prompt_tokens = len(_tokens(prompt)) + 1
    completion_tokens = min(len(pieces), max_tokens)
    run.prompt_tokens += prompt_tokens
    run.generation_tokens += completion_tokens
    run.finished[reason] = run.finished.get(reason, 0) + 1
    usage = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }
    ident = uuid.UUID(int=machine.rng.getrandbits(128)).hex
    if chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": text,
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "tool_calls": [],
                "reasoning_content": None,
            },
            "logprobs": None,
            "finish_reason": reason,
            "stop_reason": None,
        }
        obj, prefix = "chat.completion", "chatcmpl-"
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": reason,
            "stop_reason": None,
            "prompt_logprobs": None,
        }
        obj, prefix = "text_completion", "cmpl-"
    return _json(
        200,
        {
            "id": prefix + ident,
            "object": obj,
            "created": int(time.time()),
            "model": model if isinstance(model, str) else engine.served_name,
            "choices": [choice],
            "service_tier": None,
            "system_fingerprint": None,
            "usage": usage,
            "kv_transfer_params": None,
        },
    )
