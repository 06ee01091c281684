"""The coherence suite: what each check sends, and how its answers are judged. Pure apart from
`suite_for`, which gives a model its default suite the first time it is evaluated.

A check is judged on what the server answered at temperature 0:

- factual, arithmetic, multi-turn chat (through /v1/chat/completions) and long-context recall
  pass when the answer contains what the check expects;
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


def request_for(check: CoherenceCheck, served_name: str) -> tuple[str, dict[str, Any]]:
    """(endpoint, JSON body) of the check's request: greedy, at temperature 0."""
    body: dict[str, Any] = {"model": served_name, "max_tokens": check.max_tokens, "temperature": 0}
    if check.kind == CheckKind.CHAT:
        return "chat", {**body, "messages": check.messages}
    prompt = check.prompt
    if check.kind == CheckKind.LONG_CONTEXT:
        prompt = prompt.replace(FILLER_MARK, filler(check.context_words))
    return "completions", {**body, "prompt": prompt}


def answer_from(endpoint: str, payload: Any) -> Answer:
    """The text and the prompt tokens of a /v1/completions or /v1/chat/completions answer."""
    try:
        choice = payload["choices"][0]
        text = choice["message"]["content"] if endpoint == "chat" else choice["text"]
    except (KeyError, IndexError, TypeError):
        return Answer(error="the answer is not of the expected shape")
    usage = payload.get("usage") if isinstance(payload, dict) else None
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return Answer(str(text or ""), tokens if isinstance(tokens, int) else None)


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


def result_row(check: CoherenceCheck, answers: Sequence[Answer], judged: Judged) -> dict[str, Any]:
    """One check's entry in Evaluation.results (what the pages and the API show)."""
    first = answers[0] if answers else Answer()
    shown_prompt = check.prompt
    if check.kind == CheckKind.LONG_CONTEXT:
        shown_prompt = check.prompt.replace(FILLER_MARK, f"[{check.context_words} filler words]")
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
    """(passed, one line for people): any failed check fails the suite; inconclusive does not."""
    failed = [r["name"] for r in results if r["outcome"] == CheckOutcome.FAILED]
    unsure = [r["name"] for r in results if r["outcome"] == CheckOutcome.INCONCLUSIVE]
    if failed:
        return False, f"failed {len(failed)} of {len(results)} checks: {', '.join(failed)}"
    said = f"; inconclusive: {', '.join(unsure)}" if unsure else ""
    return True, f"passed {len(results) - len(unsure)} of {len(results)} checks{said}"
