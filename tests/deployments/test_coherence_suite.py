"""The coherence suite's rules: what each check sends, how its answers are judged, and the
default suite a model gets the first time it is evaluated."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from deployments.choices import CheckKind
from deployments.evaluation import coherence
from deployments.evaluation.coherence import Answer
from deployments.models import CoherenceCheck
from simulator.http import text

pytestmark = pytest.mark.django_db


def check(kind: str, **kw) -> CoherenceCheck:
    defaults = {"name": kind, "prompt": "The capital of Japan is", "expect": "Tokyo"}
    return CoherenceCheck(kind=kind, **{**defaults, **kw})


def test_a_model_gets_the_default_suite_once(catalog):
    model = catalog["INT4"]
    first = coherence.suite_for(model)
    assert [c.kind for c in first] == [
        CheckKind.FACTUAL, CheckKind.ARITHMETIC, CheckKind.CHAT, CheckKind.LONG_CONTEXT,
        CheckKind.FIVE_TOKENS, CheckKind.DETERMINISM, CheckKind.PREVIOUS_REVISION,
    ]  # fmt: skip
    # The factual check is the model's smoke prompt, so what held before still holds.
    assert (first[0].prompt, first[0].expect) == (model.smoke_prompt, model.smoke_expect)
    CoherenceCheck.objects.filter(pk=first[1].pk).update(enabled=False)  # edited in the admin
    again = coherence.suite_for(model)
    assert len(again) == 6 and CoherenceCheck.objects.filter(model=model).count() == 7


def test_the_five_token_prompt_is_five_tokens_in_the_simulator():
    five = next(s for s in coherence.default_suite("x", "y") if s["kind"] == CheckKind.FIVE_TOKENS)
    assert text.prompt_usage_tokens(five["prompt"]) == 5
    # Five common words: one token each in tiktoken-style vocabularies too.
    assert len(five["prompt"].split()) == 5


def test_a_right_answer_of_the_wrong_length_is_inconclusive():
    five = check(CheckKind.FIVE_TOKENS)
    assert coherence.judge(five, [Answer(" Tokyo, the", 5)]).outcome == "passed"
    six = coherence.judge(five, [Answer(" Tokyo, the", 6)])
    assert six.outcome == "inconclusive" and "counted 6 tokens, not five" in six.detail
    assert coherence.judge(five, [Answer(" Tokyo", None)]).outcome == "inconclusive"
    # A wrong answer fails whatever the count.
    assert coherence.judge(five, [Answer(" blor-quint zeph", 6)]).outcome == "failed"


def test_expected_text_is_matched_in_any_case_and_errors_fail():
    factual = check(CheckKind.FACTUAL, prompt="The capital of France is", expect="Paris")
    assert coherence.judge(factual, [Answer(" PARIS.")]).outcome == "passed"
    failed = coherence.judge(factual, [Answer(error="HTTP 500: engine dead")])
    assert failed.outcome == "failed" and failed.detail == "HTTP 500: engine dead"


def test_greedy_determinism_needs_the_same_text_twice():
    same = check(CheckKind.DETERMINISM, expect="")
    assert coherence.judge(same, [Answer(" a"), Answer(" a")]).outcome == "passed"
    differs = coherence.judge(same, [Answer(" a b"), Answer(" a c")])
    assert differs.outcome == "failed" and differs.extra["second_answer"] == " a c"


def test_the_chat_check_goes_to_chat_completions_and_the_long_one_gets_its_filler():
    chat = check(
        CheckKind.CHAT, prompt="", messages=[{"role": "user", "content": "Capital of Japan?"}]
    )
    endpoint, body = coherence.request_for(chat, "kimi-k2.5")
    assert endpoint == "chat" and body["messages"] == chat.messages
    assert body["temperature"] == 0 and body["model"] == "kimi-k2.5"
    long = check(
        CheckKind.LONG_CONTEXT, prompt="the passphrase is x-1.\n{filler}\nWhat is the passphrase?",
        context_words=500,
    )  # fmt: skip
    endpoint, body = coherence.request_for(long, "kimi-k2.5")
    assert endpoint == "completions" and len(body["prompt"].split()) == 500 + 8
    assert body == coherence.request_for(long, "kimi-k2.5")[1]  # the same filler every time
    # The simulator recalls the stated fact across the filler.
    assert "x-1" in text.answer(body["prompt"])


def test_answers_from_both_endpoints():
    chat = {"choices": [{"message": {"content": "Tokyo"}}], "usage": {"prompt_tokens": 19}}
    assert coherence.answer_from("chat", chat) == Answer("Tokyo", 19)
    assert coherence.answer_from("completions", {"choices": [{"text": " 4"}]}) == Answer(" 4")
    assert coherence.answer_from("completions", {"choices": []}).error is not None


def test_the_comparison_with_the_previous_run_fails_on_a_regression_only():
    before = {
        "evaluation": 7,
        "revision": 1,
        "checks": [
            {"name": "factual", "outcome": "passed", "answer": " Paris."},
            {"name": "five-token prompt", "outcome": "failed", "answer": " blor"},
        ],
    }
    fixed = [
        {"name": "factual", "outcome": "passed", "answer": " Paris."},
        {"name": "five-token prompt", "outcome": "passed", "answer": " Tokyo"},
    ]
    judged = coherence.compare_with(fixed, before)
    assert judged.outcome == "passed" and judged.extra["changed"] == ["five-token prompt"]
    broken = [{"name": "factual", "outcome": "failed", "answer": " blor"}]
    judged = coherence.compare_with(broken, before)
    assert judged.outcome == "failed" and judged.extra["regressions"] == ["factual"]
    assert coherence.compare_with(fixed, None).outcome == "inconclusive"


def test_inconclusive_checks_do_not_fail_the_suite():
    results = [
        {"name": "a", "outcome": "passed"},
        {"name": "b", "outcome": "inconclusive"},
    ]
    assert coherence.suite_summary(results) == (True, "passed 1 of 2 checks; inconclusive: b")
    results.append({"name": "c", "outcome": "failed"})
    assert coherence.suite_summary(results) == (False, "failed 1 of 3 checks: c")


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"kind": CheckKind.CHAT, "prompt": "", "messages": []}, "messages"),
        ({"kind": CheckKind.FACTUAL, "prompt": " "}, "prompt"),
        ({"kind": CheckKind.FACTUAL, "expect": ""}, "expect"),
        ({"kind": CheckKind.LONG_CONTEXT, "context_words": 100}, "prompt"),
        (
            {
                "kind": CheckKind.CHAT,
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "x"},
                ],
            },
            "messages",
        ),
        ({"kind": CheckKind.CHAT, "messages": [{"role": "root", "content": "hi"}]}, "messages"),
    ],
)
def test_an_edited_check_is_validated(catalog, fields, error):
    row = check(fields.pop("kind"), model=catalog["INT4"], **fields)
    with pytest.raises(ValidationError) as raised:
        row.full_clean()
    assert error in raised.value.message_dict


def test_within_a_change_answers_are_compared_with_its_baseline(deployment, operator):
    import datetime as dt

    from django.utils import timezone

    from deployments import services
    from deployments.evaluation.selectors import previous_suite
    from deployments.models import Evaluation
    from tests import factories as f

    change = services.change_request_create(
        user=operator, deployment=deployment, kind="restart",
        snapshot=f.make_snapshot(deployment.host), reason="patch",
    )  # fmt: skip
    start = timezone.now()

    def suite(phase, minutes, **kw):
        return Evaluation.objects.create(
            deployment=deployment, revision=change.from_revision, phase=phase, kind="coherence",
            started_at=start + dt.timedelta(minutes=minutes),
            finished_at=start + dt.timedelta(minutes=minutes), passed=True,
            results={"checks": [{"name": phase, "outcome": "passed"}]}, **kw,
        )  # fmt: skip

    older = suite("on_demand", 0)
    baseline = suite("baseline", 1, change=change)
    after = suite("after", 2, change=change)
    restore = suite("restore", 3, change=change)
    assert previous_suite(baseline)["evaluation"] == older.pk
    assert previous_suite(after)["evaluation"] == baseline.pk
    # The restored revision is compared with what it answered before the change.
    assert previous_suite(restore)["evaluation"] == baseline.pk
    assert previous_suite(older) is None


def test_a_chat_answer_is_its_content_not_its_reasoning():
    """vLLM 0.32 answers message.reasoning beside content (older: reasoning_content), and
    tool_calls [] or none at all: the answer is the content either way."""
    for thought in ("reasoning", "reasoning_content"):
        message = {"role": "assistant", "content": " Tokyo.", thought: "The user asks...",
                   "tool_calls": []}  # fmt: skip
        answer = coherence.answer_from("chat", {"choices": [{"message": message}]})
        assert answer.text == " Tokyo." and answer.reasoning == "The user asks..."
        assert coherence.judge(check(CheckKind.CHAT), [answer]).outcome == "passed"
    # Still thinking when max_tokens ran out: content is null, and the verdict says why.
    thinking = {"role": "assistant", "content": None, "reasoning": "Let me think about Japan"}
    answer = coherence.answer_from("chat", {"choices": [{"message": thinking}]})
    judged = coherence.judge(check(CheckKind.CHAT), [answer])
    assert answer.error is None and answer.text == ""
    assert judged.outcome == "failed" and "still reasoning" in judged.detail


def long_check(**kw) -> CoherenceCheck:
    spec = next(s for s in coherence.default_suite("x", "y") if s["kind"] == CheckKind.LONG_CONTEXT)
    return CoherenceCheck(**{**spec, **kw})


def test_the_long_context_check_keeps_its_filler_where_it_fits():
    fit = coherence.context_fit(long_check(), 262144)
    assert fit.words == 4000 and not fit.calibrate and fit.skipped is None


def test_the_long_context_check_fits_a_small_context():
    long = long_check()
    fit = coherence.context_fit(long, 2048)
    assert fit.skipped is None and fit.calibrate and 0 < fit.words < 4000
    # Sized by bytes, which no tokenizer exceeds: it fits whatever the tokenizer.
    _, body = coherence.request_for(long, "m", fit.words)
    budget = int(2048 * 0.9) - long.max_tokens - coherence.SPECIAL_TOKENS
    assert len(body["prompt"].encode()) <= budget
    # Counted by the server (3.4 tokens a word, as the tiny tokenizer the issue met counts
    # these words): as many words as fit that count.
    counted = coherence.context_fit(long, 2048, (fit.words, int(fit.words * 3.4) + 20))
    assert fit.words <= counted.words and counted.words * 3.4 + 20 <= 2048 - long.max_tokens
    # One token a word (the simulator): more words, still within the context.
    simple = coherence.context_fit(long, 2048, (fit.words, fit.words + 20))
    assert counted.words < simple.words <= 2048 - long.max_tokens - 20


def test_a_context_too_small_skips_the_long_context_check_with_its_reason():
    fit = coherence.context_fit(long_check(), 256)
    assert fit.skipped is not None and "under 512 tokens" in fit.skipped
    judged = coherence.Judged("skipped", fit.skipped)
    row = coherence.result_row(long_check(), [], judged)
    assert row["outcome"] == "skipped"
    results = [{"name": "factual", "outcome": "passed"}, row]
    assert coherence.suite_summary(results) == (
        True,
        "passed 1 of 2 checks; skipped: long-context recall",
    )
