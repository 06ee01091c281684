"""The coherence suite: what each check sends, and how its answers are judged. Pure apart from
`suite_for`, which gives a model its default suite the first time it is evaluated.

A check is judged on what the server answered at temperature 0:

- factual, arithmetic, multi-turn chat (through /v1/chat/completions) and long-context recall
  pass when the answer contains what the check expects. A chat answer is `message.content`: a
  reasoning model's `reasoning` (vLLM 0.32) or `reasoning_content` (older) is not the answer,
  and an answer that is all reasoning says so;
- long-context recall fits the revision's max_model_len (`context_fit`): its filler shrinks
  when the configured words might not fit beside the question and the answer's max_tokens, and
  on a context under MIN_CONTEXT_TOKENS it is skipped, with the reason, which neither passes
  nor fails the suite;
- the five-token prompt also records the prompt tokens the server counted (usage): a right
  answer to a prompt that was not five tokens on this model's tokenizer proves nothing about
  the five-token path, so it is inconclusive (a wrong answer fails either way);
- greedy determinism sends its prompt twice and needs the same text both times;
- "same answers as before" compares every other check with the deployment's previous suite
  run (right before the change, when there was one): a check that passed then and fails now is
  a regression and fails it; answers that merely changed are listed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from ..choices import CheckKind, CheckOutcome
from .models import FILLER_MARK, CoherenceCheck

FIVE = 5
ANSWER_CHARS = 400
# Long-context recall on the revision's context (context_fit). Below MIN_CONTEXT_TOKENS the
# check is skipped; the prompt keeps CONTEXT_MARGIN of the context free beside the answer's
# max_tokens (special tokens, and words are not tokens); SPECIAL_TOKENS bounds what a tokenizer
# adds (a BOS and the like) on top of the text's bytes.
MIN_CONTEXT_TOKENS = 512
CONTEXT_MARGIN = 0.1
SPECIAL_TOKENS = 8
# Neutral words for the long-context filler: no sentence, no "the X is Y." a question could
# mistake for the fact, none of the words a check expects.
_FILLER = (
    "river",
    "stone",
    "lantern",
    "meadow",
    "copper",
    "harbor",
    "violet",
    "orchard",
    "thunder",
    "pebble",
    "candle",
    "garden",
    "marble",
    "canyon",
    "willow",
    "ember",
    "saddle",
    "glacier",
    "compass",
    "feather",
    "basket",
    "lumber",
    "anchor",
    "prairie",
    "velvet",
    "quarry",
    "beacon",
    "thistle",
    "cobalt",
    "meadowlark",
    "timber",
    "ribbon",
    "granite",
    "harvest",
    "spindle",
    "lagoon",
    "saffron",
    "falcon",
    "tundra",
    "pewter",
    "juniper",
)


@dataclass(frozen=True)
class Answer:
    """What the server said to one request (or why it said nothing usable)."""

    text: str = ""
    prompt_tokens: int | None = None
    error: str | None = None
    reasoning: str = ""  # a reasoning model's thinking (chat), which is not the answer


@dataclass(frozen=True)
class Judged:
    outcome: str  # CheckOutcome
    detail: str
    extra: dict[str, Any] = field(default_factory=dict)


def default_suite(smoke_prompt: str, smoke_expect: str) -> list[dict[str, Any]]:
    """The checks every model starts with; the factual one is its catalog smoke prompt."""
    return [
        {"kind": CheckKind.FACTUAL, "name": "factual", "prompt": smoke_prompt,
         "expect": smoke_expect},
        {"kind": CheckKind.ARITHMETIC, "name": "arithmetic", "prompt": "2 + 2 =", "expect": "4"},
        {"kind": CheckKind.CHAT, "name": "multi-turn chat", "expect": "Tokyo", "messages": [
            {"role": "user", "content": "What is the capital of Italy?"},
            {"role": "assistant", "content": "The capital of Italy is Rome."},
            {"role": "user", "content": "And what is the capital of Japan?"},
        ]},
        {"kind": CheckKind.LONG_CONTEXT, "name": "long-context recall", "context_words": 4000,
         "prompt": f"Remember this: the passphrase is amber-falcon.\n{FILLER_MARK}\n"
                   "What is the passphrase?",
         "expect": "amber-falcon", "max_tokens": 16},
        # Five tokens with tiktoken-style tokenizers (each a common word) and in the simulator.
        {"kind": CheckKind.FIVE_TOKENS, "name": "five-token prompt",
         "prompt": "The capital of Japan is", "expect": "Tokyo"},
        {"kind": CheckKind.DETERMINISM, "name": "greedy determinism",
         "prompt": "Write one sentence about the sea."},
        {"kind": CheckKind.PREVIOUS_REVISION, "name": "same answers as before"},
    ]  # fmt: skip


def suite_for(model: Any) -> list[CoherenceCheck]:
    """The model's enabled checks, in order; its default suite the first time it is asked."""
    with transaction.atomic():
        # Jobs starting together on a model without a suite: the model's row lock lets one of
        # them create it and the others find it, instead of both inserting it.
        type(model).objects.select_for_update().filter(pk=model.pk).exists()
        if not CoherenceCheck.objects.filter(model=model).exists():
            for position, spec in enumerate(default_suite(model.smoke_prompt, model.smoke_expect)):
                check = CoherenceCheck(model=model, position=position, **spec)
                check.full_clean()
                check.save()
    return list(CoherenceCheck.objects.filter(model=model, enabled=True).order_by("position", "pk"))


def filler(words: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_FILLER) for _ in range(words))


@dataclass(frozen=True)
class ContextFit:
    """How much filler a long-context check sends on a context of `max_model_len` tokens."""

    words: int  # filler words to send
    max_model_len: int
    skipped: str | None = None  # why the check does not run at all
    # Send `words` filler words first with max_tokens 1 and give the prompt tokens the server
    # counted back to context_fit: the words that fit are then sized in the model's tokens.
    calibrate: bool = False

    def shortened(self, check: CoherenceCheck) -> bool:
        return self.skipped is None and self.words < check.context_words


def _prompt_with(check: CoherenceCheck, words: int) -> str:
    return check.prompt.replace(FILLER_MARK, filler(words))


def context_fit(
    check: CoherenceCheck, max_model_len: int, counted: tuple[int, int] | None = None
) -> ContextFit:
    """The filler of a long-context check that fits `max_model_len` with room for the answer.

    A tokenizer never makes more tokens of a text than it has UTF-8 bytes (plus a few special
    tokens), so the words whose bytes fit the budget always fit: the configured filler, when it
    does, or else that many words once to count (`calibrate`). `counted` is (words, prompt
    tokens) the server counted for such a prompt: the words that fit are then the budget over
    its tokens per word (the question's tokens charged to the words, which errs short)."""
    budget = int(max_model_len * (1 - CONTEXT_MARGIN)) - check.max_tokens
    if max_model_len < MIN_CONTEXT_TOKENS:
        return ContextFit(
            0,
            max_model_len,
            f"skipped: the context (max_model_len {max_model_len}) is under "
            f"{MIN_CONTEXT_TOKENS} tokens, too small for a long-context check",
        )
    by_bytes = _words_within_bytes(check, budget - SPECIAL_TOKENS)
    if by_bytes < 1:
        return ContextFit(
            0,
            max_model_len,
            f"skipped: the question and {check.max_tokens} answer tokens leave no room for "
            f"filler in a context of {max_model_len} tokens",
        )
    if by_bytes >= check.context_words:
        return ContextFit(check.context_words, max_model_len)
    if counted is None:
        return ContextFit(by_bytes, max_model_len, calibrate=True)
    words, tokens = counted
    fitting = int(budget * words / tokens) if tokens > 0 else by_bytes
    return ContextFit(max(by_bytes, min(check.context_words, fitting)), max_model_len)


def _words_within_bytes(check: CoherenceCheck, limit: int) -> int:
    """The most filler words (up to the check's) whose prompt has at most `limit` bytes."""
    rest = len(check.prompt.replace(FILLER_MARK, "").encode())
    if rest > limit:
        return 0
    words = filler(check.context_words).split()
    used, count = rest, 0
    for word in words:
        used += len(word.encode()) + (1 if count else 0)
        if used > limit:
            break
        count += 1
    return count


def calibration_request(check: CoherenceCheck, served_name: str, words: int) -> dict[str, Any]:
    """A completion of the long-context prompt with `words` filler words and one token: its
    usage is the server's count of that prompt in the model's tokens."""
    body = {"model": served_name, "max_tokens": 1, "temperature": 0}
    return {**body, "prompt": _prompt_with(check, words)}


def request_for(
    check: CoherenceCheck, served_name: str, context_words: int | None = None
) -> tuple[str, dict[str, Any]]:
    """(endpoint, JSON body) of the check's request: greedy, at temperature 0. A long-context
    check sends `context_words` filler words (its own number when not given)."""
    body: dict[str, Any] = {"model": served_name, "max_tokens": check.max_tokens, "temperature": 0}
    if check.kind == CheckKind.CHAT:
        return "chat", {**body, "messages": check.messages}
    prompt = check.prompt
    if check.kind == CheckKind.LONG_CONTEXT:
        words = check.context_words if context_words is None else context_words
        prompt = _prompt_with(check, words)
    return "completions", {**body, "prompt": prompt}


def answer_from(endpoint: str, payload: Any) -> Answer:
    """The text and the prompt tokens of a /v1/completions or /v1/chat/completions answer. A
    chat answer is the message's content; its reasoning (`reasoning` in vLLM 0.32,
    `reasoning_content` in older servers) and tool calls (none, [] or absent) are not."""
    try:
        choice = payload["choices"][0]
        part = choice["message"] if endpoint == "chat" else choice
        if not isinstance(part, dict):
            raise TypeError
        text = part.get("content") if endpoint == "chat" else part["text"]
    except (KeyError, IndexError, TypeError):
        return Answer(error="the answer is not of the expected shape")
    thought = (part.get("reasoning") or part.get("reasoning_content")) if endpoint == "chat" else ""
    usage = payload.get("usage") if isinstance(payload, dict) else None
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return Answer(
        text if isinstance(text, str) else "",
        tokens if isinstance(tokens, int) else None,
        reasoning=thought[:ANSWER_CHARS] if isinstance(thought, str) else "",
    )


def _contains(answer: Answer, expect: str) -> bool:
    return answer.error is None and expect.strip().lower() in answer.text.lower()


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return repr(text[:80] + ("…" if len(text) > 80 else ""))


def judge(check: CoherenceCheck, answers: Sequence[Answer]) -> Judged:
    """One check's verdict from its answers (two for determinism, one otherwise)."""
    first = answers[0] if answers else Answer(error="no answer")
    if first.error is not None:
        return Judged(CheckOutcome.FAILED, first.error)
    if check.kind == CheckKind.DETERMINISM:
        second = answers[1] if len(answers) > 1 else Answer(error="no second answer")
        if second.error is not None:
            return Judged(CheckOutcome.FAILED, second.error)
        if first.text != second.text:
            return Judged(
                CheckOutcome.FAILED,
                f"two greedy answers differ: {_shown(first.text)} then {_shown(second.text)}",
                {"second_answer": second.text[:ANSWER_CHARS]},
            )
        return Judged(CheckOutcome.PASSED, "the same text twice")
    if not _contains(first, check.expect):
        if not first.text.strip() and first.reasoning:
            return Judged(
                CheckOutcome.FAILED,
                f"expected {check.expect!r}, got no answer: the model was still reasoning when "
                f"its {check.max_tokens} tokens ran out (raise the check's max_tokens)",
                {"reasoning": first.reasoning},
            )
        return Judged(CheckOutcome.FAILED, f"expected {check.expect!r}, got {_shown(first.text)}")
    if check.kind == CheckKind.FIVE_TOKENS and first.prompt_tokens != FIVE:
        counted = "no usage" if first.prompt_tokens is None else f"{first.prompt_tokens} tokens"
        return Judged(
            CheckOutcome.INCONCLUSIVE,
            f"the server counted {counted}, not five: this prompt does not reach the five-token "
            "path on this model's tokenizer (edit it in the suite)",
        )
    return Judged(CheckOutcome.PASSED, f"contains {check.expect!r}")


def compare_with(results: list[dict[str, Any]], reference: dict[str, Any] | None) -> Judged:
    """The "same answers as before" check: this run's results against a previous run's."""
    if not reference:
        return Judged(CheckOutcome.INCONCLUSIVE, "no earlier suite run to compare with")
    before = {r["name"]: r for r in reference.get("checks", [])}
    regressions, changed = [], []
    for result in results:
        then = before.get(result["name"])
        if then is None:
            continue
        if then["outcome"] == CheckOutcome.PASSED and result["outcome"] == CheckOutcome.FAILED:
            regressions.append(result["name"])
        elif then.get("answer") != result.get("answer"):
            changed.append(result["name"])
    when = f"evaluation #{reference.get('evaluation')} (revision {reference.get('revision')})"
    extra = {"compared_with": reference.get("evaluation"), "changed": changed}
    if regressions:
        return Judged(
            CheckOutcome.FAILED,
            f"passed in {when}, fail now: {', '.join(regressions)}",
            {**extra, "regressions": regressions},
        )
    said = f"; answers changed: {', '.join(changed)}" if changed else "; the same answers"
    return Judged(CheckOutcome.PASSED, f"no regression against {when}{said}", extra)


def fitted(judged: Judged, fit: ContextFit, check: CoherenceCheck) -> Judged:
    """A long-context check's verdict, saying how its filler was fitted to the context."""
    extra = {**judged.extra, "context_words_sent": fit.words, "max_model_len": fit.max_model_len}
    if not fit.shortened(check):
        return Judged(judged.outcome, judged.detail, extra)
    said = (
        f"{judged.detail} ({fit.words} of {check.context_words} filler words, to fit "
        f"max_model_len {fit.max_model_len})"
    )
    return Judged(judged.outcome, said, extra)


def result_row(check: CoherenceCheck, answers: Sequence[Answer], judged: Judged) -> dict[str, Any]:
    """One check's entry in Evaluation.results (what the pages and the API show)."""
    first = answers[0] if answers else Answer()
    shown_prompt = check.prompt
    if check.kind == CheckKind.LONG_CONTEXT:
        words = judged.extra.get("context_words_sent", check.context_words)
        shown_prompt = check.prompt.replace(FILLER_MARK, f"[{words} filler words]")
    if check.kind == CheckKind.CHAT:
        shown_prompt = " / ".join(f"{m['role']}: {m['content']}" for m in check.messages)
    return {
        "check": check.pk,
        "kind": check.kind,
        "name": check.name,
        "outcome": judged.outcome,
        "detail": judged.detail,
        "prompt": shown_prompt[:ANSWER_CHARS],
        "expect": check.expect,
        "answer": first.text[:ANSWER_CHARS],
        "prompt_tokens": first.prompt_tokens,
        **judged.extra,
    }


def suite_summary(results: list[dict[str, Any]]) -> tuple[bool, str]:
    """(passed, one line for people): any failed check fails the suite; inconclusive and
    skipped checks do not (nor do they count as passed)."""
    failed = [r["name"] for r in results if r["outcome"] == CheckOutcome.FAILED]
    unsure = [r["name"] for r in results if r["outcome"] == CheckOutcome.INCONCLUSIVE]
    skipped = [r["name"] for r in results if r["outcome"] == CheckOutcome.SKIPPED]
    if failed:
        return False, f"failed {len(failed)} of {len(results)} checks: {', '.join(failed)}"
    said = f"; inconclusive: {', '.join(unsure)}" if unsure else ""
    said += f"; skipped: {', '.join(skipped)}" if skipped else ""
    passed = len(results) - len(unsure) - len(skipped)
    return True, f"passed {passed} of {len(results)} checks{said}"
