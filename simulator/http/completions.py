"""/v1/completions and /v1/chat/completions: answers coherent enough for a smoke test.

A few well-known prompts get their well-known answers, anything else a generic paragraph; under
the `incoherent` fault (or `--load-format dummy`) the model babbles syllables instead.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

from .responses import Response, error, json_response

if TYPE_CHECKING:
    from ..state import Machine, Run
    from ..vllm_cli import EngineArgs

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


def completion(machine: Machine, run: Run, body: str | None, *, chat: bool) -> Response:
    engine = run.engine
    assert engine is not None
    request = _read_request(engine, body, chat=chat)
    if isinstance(request, Response):
        return request
    prompt, max_tokens, model = request
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
        choice, obj, prefix = _chat_choice(text, reason), "chat.completion", "chatcmpl-"
    else:
        choice, obj, prefix = _text_choice(text, reason), "text_completion", "cmpl-"
    return json_response(
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


def _read_request(
    engine: EngineArgs, body: str | None, *, chat: bool
) -> tuple[str, int, object] | Response:
    """The prompt, max_tokens and the model asked for; or the 4xx vLLM answers."""
    try:
        payload = json.loads(body or "")
    except ValueError:
        return error(400, "JSON decode error", "BadRequestError")
    if not isinstance(payload, dict):
        return error(400, "Input should be a valid dictionary", "BadRequestError")
    model = payload.get("model")
    if model is not None and model not in (engine.served_names or (engine.served_name,)):
        return error(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
    if chat:
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            return error(400, "Field required: messages", "BadRequestError")
        prompt = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    else:
        raw = payload.get("prompt")
        if isinstance(raw, list) and raw and all(isinstance(p, str) for p in raw):
            raw = raw[0]
        if not isinstance(raw, str) or not raw:
            return error(
                400,
                "Either prompt or prompt_embeds must be provided and non-empty.",
                "BadRequestError",
            )
        prompt = raw
    max_tokens = payload.get("max_tokens", payload.get("max_completion_tokens"))
    if max_tokens is None:
        max_tokens = 16 if not chat else 256
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return error(400, f"max_tokens must be at least 1, got {max_tokens}.", "BadRequestError")
    return prompt, max_tokens, model


def _chat_choice(text: str, reason: str) -> dict[str, Any]:
    return {
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


def _text_choice(text: str, reason: str) -> dict[str, Any]:
    return {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": reason,
        "stop_reason": None,
        "prompt_logprobs": None,
    }
