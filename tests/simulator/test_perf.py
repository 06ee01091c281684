"""The performance model and the scheduler that walks it, without any I/O."""

from __future__ import annotations

import pytest

from simulator import catalog, perf, scheduler

INT4 = "/models/moonshotai/Kimi-K2.5-INT4"
NVFP4 = "/models/moonshotai/Kimi-K2.5-NVFP4"
MINIMAX = "/models/MiniMaxAI/MiniMax-M2.5-FP8"


def within(value: float, target: float, share: float = 0.10) -> bool:
    return abs(value - target) <= share * target


@pytest.mark.parametrize(
    ("path", "single", "aggregate"),
    [(INT4, 82, 2200), (NVFP4, 45, 1100)],
)
def test_the_calibration_points_hold(path: str, single: float, aggregate: float) -> None:
    one = scheduler.estimate(path, concurrency=1)
    many = scheduler.estimate(path, concurrency=64)
    assert within(one.output_tok_s, single) and within(one.per_stream_tok_s, single)
    assert within(many.output_tok_s, aggregate)


def test_minimax_sits_between_the_two_kimi_builds() -> None:
    for concurrency in (1, 8, 32, 64):
        rates = [
            scheduler.estimate(p, concurrency=concurrency).output_tok_s
            for p in (NVFP4, MINIMAX, INT4)
        ]
        assert rates == sorted(rates), (concurrency, rates)


def test_nvfp4_decode_is_bound_by_pcie_allreduce() -> None:
    nvfp4, int4 = perf.profile_for(NVFP4), perf.profile_for(INT4)
    for batch in (1, 64):
        assert 0.65 <= perf.allreduce_share(nvfp4, tp=8, batch=batch, context=256) <= 0.70
        assert perf.allreduce_share(int4, tp=8, batch=batch, context=256) < 0.40


def test_ttft_grows_with_prompt_length_and_concurrency() -> None:
    by_length = [scheduler.estimate(INT4, input_tokens=n).ttft_s for n in (128, 1024, 8192, 32768)]
    assert by_length == sorted(by_length) and by_length[-1] > 20 * by_length[0]
    by_load = [scheduler.estimate(INT4, concurrency=c).ttft_s for c in (1, 8, 32, 64)]
    assert by_load == sorted(by_load) and by_load[-1] > 10 * by_load[0]


def test_batching_saturates_per_stream_rate_falls_aggregate_rises() -> None:
    model = perf.profile_for(INT4)
    steps = [perf.decode_seconds(model, tp=8, batch=b, context=256) for b in (1, 8, 32, 64, 256)]
    assert steps == sorted(steps)
    aggregate = [b / s for b, s in zip((1, 8, 32, 64, 256), steps, strict=True)]
    assert aggregate == sorted(aggregate)
    # The saturation curve: 256 sequences touch most experts, one touches k of E.
    assert perf.expert_share(model, 1) == pytest.approx(8 / 384)
    assert 0.3 < perf.expert_share(model, 256) < 1
    longer = perf.decode_seconds(model, tp=8, batch=64, context=32768)
    assert longer > steps[3]  # attending over longer contexts reads more KV cache


def test_the_step_formula_parts() -> None:
    model = perf.profile_for(INT4)
    pcie = perf.step_cost(model, tp=8, tokens=1)
    nvlink = perf.step_cost(model, tp=8, interconnect="nvlink", tokens=1)
    assert nvlink.allreduce_s < pcie.allreduce_s and nvlink.memory_s == pcie.memory_s
    assert perf.step_cost(model, tp=1, tokens=1).allreduce_s == 0
    eager = perf.step_cost(model, tp=8, tokens=1, eager=True)
    assert eager.seconds > pcie.seconds
    prompt = perf.step_cost(model, tp=8, tokens=8192, attention_pairs=8192 * 4096)
    assert prompt.flops_s > prompt.memory_s  # a long prompt is compute-bound


def test_unknown_models_get_a_generic_dense_profile() -> None:
    generic = perf.profile_for("/models/someone/tiny", weights_gib=16)
    assert generic.routed_share == 0 and generic.weights_gib == 16
    assert scheduler.estimate("/models/someone/tiny", weights_gib=16, tp=1).output_tok_s > 0


def test_the_catalog_knows_minimax_and_every_profile_is_in_it() -> None:
    model = catalog.MODELS_BY_PATH[MINIMAX]
    assert (model.name, model.variant, model.served_name) == (
        "MiniMaxAI/MiniMax-M2.5",
        "FP8",
        "minimax-m2.5",
    )
    assert 225 <= model.weights_gib * 1.073741824 <= 235  # ~230 GB
    assert set(perf.PROFILES) <= set(catalog.MODELS_BY_PATH)


def test_the_scheduler_chunks_long_prompts_and_caps_the_batch() -> None:
    batcher = scheduler.Batcher(lambda tokens, kv, pairs: 0.01, max_num_seqs=2)
    long = scheduler.Sequence(prompt_tokens=20000, max_tokens=2)
    batcher.add(long)
    steps = 0
    while not long.generated:
        step = batcher.plan()
        assert step is not None
        assert sum(n for _, n in step.chunks) <= scheduler.MAX_BATCHED_TOKENS
        batcher.commit(step)
        steps += 1
    assert steps == 3  # 8192 + 8192 + 3616 prompt tokens, first token with the last chunk
    others = [scheduler.Sequence(4, 4) for _ in range(3)]
    for seq in others:
        batcher.add(seq)
    step = batcher.plan()
    assert step is not None and len(batcher.running) == 2  # max_num_seqs: one waits
    batcher.remove(others[1])
    assert others[1].aborted and len(batcher) == 3  # the long one, and two others
