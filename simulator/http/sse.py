"""A streamed completion as vLLM sends it: server-sent events, one chunk per step's tokens.

`data: {chunk}` events, then (with `stream_options.include_usage`) a last chunk with no choices
and the usage, then `data: [DONE]`. With `continuous_usage_stats` every chunk carries the usage
so far. Chat streams open with a chunk carrying only the assistant's role. A token that ends
inside a UTF-8 character streams with empty text (its piece is ""), and a reasoning model's
thinking streams as `delta.reasoning` (vLLM 0.32), its answer as `delta.content`. As vLLM 0.32
leaves unset fields out, a chunk has `usage` only when it carries one, and only the stream's last
chunk has the `system_fingerprint`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .completions import Plan

DONE = "data: [DONE]\n\n"


def event(payload: dict[str, Any]) -> str:
    return "data: " + json.dumps(payload, separators=(",", ":"), ensure_ascii=False) + "\n\n"


def _chunk(
    answer: Plan, choices: list[dict[str, Any]], usage: Any, *, last: bool = False
) -> dict[str, Any]:
    """One event's payload, with the keys vLLM 0.32 sends (it leaves unset fields out): the
    usage only when there is one to send, the system fingerprint on the last chunk."""
    chunk: dict[str, Any] = {
        "id": answer.ident,
        "object": "chat.completion.chunk" if answer.chat else "text_completion",
        "created": answer.created,
        "model": answer.model,
        "choices": choices,
    }
    if usage is not None:
        chunk["usage"] = usage
    if last:
        chunk["system_fingerprint"] = answer.fingerprint
    return chunk


def opening(answer: Plan) -> str:
    """What goes before the first token ("" for completions)."""
    if not answer.chat:
        return ""
    delta = {"role": "assistant", "content": ""}
    usage = answer.usage(0) if answer.continuous_usage else None
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
    return event(_chunk(answer, [choice], usage) | {"prompt_token_ids": None, "prompt_text": None})


def tokens(answer: Plan, start: int, end: int) -> str:
    """One chunk with tokens [start, end): what one engine step (or several) produced."""
    piece = "".join(answer.pieces[start:end])
    last = end >= answer.completion_tokens
    reason = answer.reason if last else None
    if answer.chat:
        delta: dict[str, str] = {}
        if start < answer.reasoning:
            delta["reasoning"] = "".join(answer.pieces[start : min(end, answer.reasoning)])
        if end > answer.reasoning:
            delta["content"] = "".join(answer.pieces[max(start, answer.reasoning) : end])
        choice: dict[str, Any] = {
            "index": 0,
            "delta": delta or {"content": piece},
            "logprobs": None,
            "finish_reason": reason,
        }
        if last:
            choice["stop_reason"] = None
        choice["token_ids"] = None
    else:
        choice = {
            "index": 0,
            "text": piece,
            "logprobs": None,
            "finish_reason": reason,
            "stop_reason": None,
            "prompt_token_ids": None,
            "token_ids": None,
        }
    usage = answer.usage(end) if answer.continuous_usage else None
    # The fingerprint goes on the stream's last chunk: the usage chunk, when one follows.
    return event(_chunk(answer, [choice], usage, last=last and not answer.include_usage))


def closing(answer: Plan) -> str:
    """The usage chunk (if asked for) and [DONE]."""
    usage = event(_chunk(answer, [], answer.usage(), last=True)) if answer.include_usage else ""
    return usage + DONE


def whole_stream(answer: Plan) -> str:
    """Every event at once, as curl prints a stream once it has ended."""
    parts = [opening(answer)]
    parts += [tokens(answer, i, i + 1) for i in range(answer.completion_tokens)]
    parts.append(closing(answer))
    return "".join(parts)
