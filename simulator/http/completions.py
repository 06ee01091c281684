"""/v1/completions and /v1/chat/completions: what vLLM answers, and how long it takes.

`plan` reads a request the way vLLM validates it and decides the whole answer up front (the
tokens, why it stops, the usage); `simulator.serving` then paces those tokens. As vLLM 0.32
does, it refuses `max_tokens` above max_model_len and a prompt longer than max_model_len (400,
the messages of its captures), and otherwise lets the answer take what is left of the context.
An engine with `--reasoning-parser` thinks first in chat (as `chat_template_kwargs` ask, else as
its template does by default): the answer's first tokens are its reasoning (REASONING), streamed
as `delta.reasoning` and answered as `message.reasoning`. Bodies carry the keys vLLM 0.32's do
(no `tool_calls` when no tool was called, a `system_fingerprint`); tests/simulator/
test_capture_parity.py compares them with the real-engine tier's captures.
`tokenize` is vLLM's POST /tokenize, counted with the same tokens as usage. The host's
`curl` gets the answer once all of it is generated (`respond`); the streaming server
(`simulator.http.loopback`) sends it chunk by chunk with `sse`.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import catalog, engine_files, serving
from . import sse, text
from .responses import Response, error, json_response

if TYPE_CHECKING:
    from ..state import Machine, Run
    from ..vllm_cli import EngineArgs

# Reasoning parsers whose models' chat templates think only when the request asks.
THINK_ONLY_WHEN_ASKED = frozenset({"deepseek_v3"})
# What a reasoning model thinks before it answers a chat (its first tokens).
REASONING = " The user asks a short question, so a short answer will do."


@dataclass
class Plan:
    """One accepted request and the answer it will get."""

    chat: bool
    model: str
    pieces: list[str]
    reason: str  # finish reason: "stop" or "length"
    prompt_tokens: int  # as usage reports them
    stream: bool
    include_usage: bool
    continuous_usage: bool
    ident: str
    created: int
    fingerprint: str
    reasoning: int = 0  # the first pieces are the model's reasoning (chat, --reasoning-parser)
    # vLLM counts reasoning tokens in the usage of chats only with a --reasoning-parser.
    reasoning_details: bool = False

    @property
    def completion_tokens(self) -> int:
        return len(self.pieces)

    @property
    def reasoning_text(self) -> str | None:
        return "".join(self.pieces[: self.reasoning]) if self.reasoning else None

    @property
    def answer_text(self) -> str | None:
        """The content ("" or the text; None when the model only reasoned, as vLLM says)."""
        if self.reasoning and len(self.pieces) <= self.reasoning:
            return None
        return "".join(self.pieces[self.reasoning :])

    def usage(self, generated: int | None = None) -> dict[str, Any]:
        """The usage counts (those of a stream's chunks: no `prompt_tokens_details`)."""
        done = self.completion_tokens if generated is None else generated
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + done,
            "completion_tokens": done,
        }
        if self.chat and self.reasoning_details:
            usage["completion_tokens_details"] = {"reasoning_tokens": min(done, self.reasoning)}
        return usage

    def whole_usage(self) -> dict[str, Any]:
        """The usage of an answer not streamed: every detail, null where there is none."""
        usage = self.usage()
        return {
            "prompt_tokens": usage["prompt_tokens"],
            "total_tokens": usage["total_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "prompt_tokens_details": None,
            "completion_tokens_details": usage.get("completion_tokens_details"),
        }


@dataclass(frozen=True)
class _Request:
    prompt: str
    max_tokens: int
    model: object
    stream: bool
    options: dict[str, Any]
    ignore_eos: bool
    thinking: bool | None = None  # chat_template_kwargs' enable_thinking / thinking, if given


def plan(machine: Machine, run: Run, body: str | None, *, chat: bool) -> Plan | Response:
    """The answer to this request, or the 4xx vLLM answers instead."""
    engine = run.engine
    assert engine is not None
    request = _read_request(engine, body, chat=chat)
    if isinstance(request, Response):
        return request
    # `--load-format dummy` serves random weights: as coherent as the incoherent fault.
    incoherent = (
        machine.fault_applies("incoherent", engine.model_path)
        or engine.load_format == "dummy"
        or (
            text.count_tokens(request.prompt) == text.CORRUPTED_PROMPT_TOKENS
            and engine_files.corrupts_five_token_prompts(machine, run)
        )
    )
    limit = machine.max_model_len(engine)
    prompt_tokens = text.prompt_usage_tokens(request.prompt)
    refused = _too_long(request.max_tokens, prompt_tokens, limit)
    if refused is not None:
        return refused
    max_tokens = min(request.max_tokens, limit - prompt_tokens)
    thinks = chat and _thinks(engine.reasoning_parser, request.thinking)
    thought = text.tokens(REASONING) if thinks else []
    thought = thought[:max_tokens]
    if thought:
        thought[0] = thought[0].lstrip()
    pieces, reason = text.continuation(
        request.prompt,
        max(1, max_tokens - len(thought)),
        incoherent=incoherent,
        ignore_eos=request.ignore_eos,
    )
    if len(thought) >= max_tokens:  # the model was still thinking when max_tokens ran out
        pieces, reason = [], "length"
    if chat and pieces:
        pieces[0] = pieces[0].lstrip()
    model = request.model
    return Plan(
        chat=chat,
        model=model if isinstance(model, str) else engine.served_name,
        pieces=thought + pieces,
        reason=reason,
        prompt_tokens=prompt_tokens,
        stream=request.stream,
        include_usage=bool(request.options.get("include_usage")),
        continuous_usage=bool(request.options.get("continuous_usage_stats")),
        ident=("chatcmpl-" if chat else "cmpl-") + uuid.UUID(int=machine.rng.getrandbits(128)).hex,
        created=int(time.time()),
        fingerprint=fingerprint(machine, engine),
        reasoning=len(thought),
        reasoning_details=chat and bool(engine.reasoning_parser),
    )


def _too_long(max_tokens: int, prompt_tokens: int, limit: int) -> Response | None:
    """vLLM 0.32's refusals of what cannot fit the context (max_tokens first, as it checks)."""
    if max_tokens > limit:
        return error(
            400,
            f"max_tokens={max_tokens} cannot be greater than max_model_len={limit}. Please "
            f"request fewer output tokens. (parameter=max_tokens, value={max_tokens})",
            "BadRequestError",
            "max_tokens",
        )
    if prompt_tokens > limit:
        # vLLM tokenizes at most max_model_len + 1 tokens of a prompt: "at least" that many.
        counted = limit + 1
        return error(
            400,
            f"This model's maximum context length is {limit} tokens. However, your prompt "
            f"contains at least {counted} input tokens, which exceeds this limit even without "
            "any output tokens. Please reduce the length of the input prompt. "
            f"(parameter=input_tokens, value={counted})",
            "BadRequestError",
            "input_tokens",
        )
    if prompt_tokens >= limit:  # no room left for one token
        return error(400, "max_tokens must be at least 1, got 0.", "BadRequestError")
    return None


def _payload(engine: EngineArgs, body: str | None) -> dict[str, Any] | Response:
    """A request's JSON object for the served model; or the 400 or 404 vLLM answers."""
    try:
        payload = json.loads(body or "")
    except ValueError:
        return error(400, "JSON decode error", "BadRequestError")
    if not isinstance(payload, dict):
        return error(400, "Input should be a valid dictionary", "BadRequestError")
    refused = _unknown_model(engine, payload.get("model"))
    return refused if refused is not None else payload


def tokenize(machine: Machine, run: Run, body: str | None) -> Response:
    """POST /tokenize as vLLM answers it: a prompt (or chat messages) in the simulator's
    tokens, counted as usage counts them; the model's context length beside it."""
    engine = run.engine
    assert engine is not None
    payload = _payload(engine, body)
    if isinstance(payload, Response):
        return payload
    prompt = _prompt(payload, "messages" in payload)
    if isinstance(prompt, Response):
        return prompt
    ids = text.token_ids(prompt)
    return json_response(
        200,
        {
            "count": len(ids),
            "max_model_len": machine.max_model_len(engine),
            "tokens": ids,
            "token_strs": text.tokens(prompt) if payload.get("return_token_strs") else None,
        },
    )


@dataclass
class Pending:
    """An accepted completion: its response exists once the engine has generated it."""

    machine: Machine
    unit_name: str
    run: Run
    answer: Plan

    async def complete(self) -> Response | None:
        """The response once every token is generated (None: the server went away first)."""
        answer = self.answer
        try:
            ok = await serving.generate(
                self.machine, self.unit_name, self.run, answer.prompt_tokens, len(answer.pieces)
            )
        except BaseException:
            account(self.run, answer, 0, aborted=True)  # the client gave up (curl -m)
            raise
        account(self.run, answer, len(answer.pieces) if ok else 0, aborted=not ok)
        return respond(answer) if ok else None


def account(run: Run, answer: Plan, generated: int, *, aborted: bool = False) -> None:
    """The engine's counters (/metrics) once a request ended."""
    run.prompt_tokens += answer.prompt_tokens
    run.generation_tokens += generated
    reason = "abort" if aborted else answer.reason
    run.finished[reason] = run.finished.get(reason, 0) + 1


def respond(answer: Plan) -> Response:
    """The whole answer at once: JSON, or every server-sent event of a stream."""
    if answer.stream:
        return Response(200, sse.whole_stream(answer), "text/event-stream; charset=utf-8")
    body = "".join(answer.pieces)
    if answer.chat:
        choice = _chat_choice(answer.answer_text, answer.reasoning_text, answer.reason)
        obj = "chat.completion"
    else:
        choice, obj = _text_choice(body, answer.reason), "text_completion"
    whole: dict[str, Any] = {
        "id": answer.ident,
        "object": obj,
        "created": answer.created,
        "model": answer.model,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": answer.fingerprint,
        "usage": answer.whole_usage(),
    }
    if answer.chat:
        whole |= {"prompt_logprobs": None, "prompt_token_ids": None, "prompt_text": None}
    whole |= {"kv_transfer_params": None, "ec_transfer_params": None, "metrics": None}
    return json_response(200, whole)


def fingerprint(machine: Machine, engine: EngineArgs) -> str:
    """`system_fingerprint` as vLLM 0.32 builds it: its version and a hash of the config."""
    config = f"{engine.model_path}|{machine.max_model_len(engine)}|{engine.tensor_parallel_size}"
    return f"vllm-{catalog.VLLM_VERSION}-{hashlib.sha256(config.encode()).hexdigest()[:8]}"


def _unknown_model(engine: EngineArgs, model: object) -> Response | None:
    names = engine.served_names or (engine.served_name,)
    if model is None or model in names:
        return None
    return error(
        404,
        f"The model `{model}` does not exist. Valid aliases: {', '.join(names)}.",
        "NotFoundError",
        "model",
    )


def invocation_is_chat(body: str | None) -> bool | Response:
    """What POST /invocations serves: a body with messages is a chat completion, one with a
    prompt a completion (vLLM tries its request types in that order); anything else 400."""
    try:
        payload = json.loads(body or "")
    except ValueError as exc:
        return json_response(400, {"detail": f"JSON decode error: {exc}"})
    if isinstance(payload, dict) and isinstance(payload.get("messages"), list):
        return True
    if isinstance(payload, dict) and "prompt" in payload:
        return False
    return error(
        400,
        "Cannot find suitable handler for request. Expected one of: "
        "['ChatCompletionRequest', 'CompletionRequest']",
        "BadRequestError",
    )


def detokenize(run: Run, body: str | None) -> Response:
    """POST /detokenize: token ids back to text (ids /tokenize gave out, or byte tokens)."""
    engine = run.engine
    assert engine is not None
    payload = _payload(engine, body)
    if isinstance(payload, Response):
        return payload
    ids = payload.get("tokens")
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
        return error(400, "Field required: tokens", "BadRequestError")
    decoded = text.detokenize(ids)
    if isinstance(decoded, int):
        return error(400, f"Token id {decoded} is out of vocabulary", "BadRequestError")
    return json_response(200, {"prompt": decoded})


def _prompt(payload: dict[str, Any], chat: bool) -> str | Response:
    if chat:
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            return error(400, "Field required: messages", "BadRequestError")
        return " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    raw = payload.get("prompt")
    if isinstance(raw, list) and raw and all(isinstance(p, str) for p in raw):
        raw = raw[0]
    if not isinstance(raw, str) or not raw:
        return error(
            400, "Either prompt or prompt_embeds must be provided and non-empty.", "BadRequestError"
        )
    return raw


def _read_request(engine: EngineArgs, body: str | None, *, chat: bool) -> _Request | Response:
    """What was asked for; or the 4xx vLLM answers."""
    payload = _payload(engine, body)
    if isinstance(payload, Response):
        return payload
    model = payload.get("model")
    prompt = _prompt(payload, chat)
    if isinstance(prompt, Response):
        return prompt
    max_tokens = payload.get("max_tokens", payload.get("max_completion_tokens"))
    if max_tokens is None:
        max_tokens = 16 if not chat else 256
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return error(400, f"max_tokens must be at least 1, got {max_tokens}.", "BadRequestError")
    stream = payload.get("stream") is True
    options = payload.get("stream_options")
    if options is not None and not stream:
        return error(
            400, "Stream options can only be defined when `stream=True`.", "BadRequestError"
        )
    return _Request(
        prompt=prompt,
        max_tokens=max_tokens,
        model=model,
        stream=stream,
        options=options if isinstance(options, dict) else {},
        ignore_eos=payload.get("ignore_eos") is True,
        thinking=_thinking_asked(payload.get("chat_template_kwargs")),
    )


def _thinking_asked(kwargs: object) -> bool | None:
    if not isinstance(kwargs, dict):
        return None
    for key in ("enable_thinking", "thinking"):
        if isinstance(kwargs.get(key), bool):
            return bool(kwargs[key])
    return None


def _thinks(parser: str | None, asked: bool | None) -> bool:
    """Whether a chat starts with reasoning: only with a --reasoning-parser, as the request's
    chat_template_kwargs ask, else as the model's template does by default (DeepSeek V3's
    templates think only when asked, as the real-engine capture shows; the others think)."""
    if not parser:
        return False
    if asked is not None:
        return asked
    return parser not in THINK_ONLY_WHEN_ASKED


def _chat_choice(content: str | None, reasoning: str | None, reason: str) -> dict[str, Any]:
    return {
        "index": 0,
        "message": {
            "role": "assistant",
            "content": content,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            "reasoning": reasoning,
        },
        "logprobs": None,
        "finish_reason": reason,
        "stop_reason": None,
        "token_ids": None,
        "routed_experts": None,
    }


def _text_choice(content: str, reason: str) -> dict[str, Any]:
    return {
        "index": 0,
        "text": content,
        "logprobs": None,
        "finish_reason": reason,
        "stop_reason": None,
        "token_ids": None,
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "routed_experts": None,
    }
