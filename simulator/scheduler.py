"""Continuous batching as vLLM's scheduler does it, in simulated time and without I/O.

Each step takes every running sequence's next token, then spends what is left of the token
budget (`--max-num-batched-tokens`, default 8192) on pending prompt tokens, oldest request
first, admitting waiting requests while fewer than `--max-num-seqs` (default 256) run, and
chunking a prompt that does not fit. A sequence whose prompt completes in a step gets its first
token at the end of that step. `simulator.perf` says how long the step takes.

`Batcher` is driven by the serving engine (`simulator.serving`) in scaled real time, and by
`estimate` here in pure simulated time: both walk the same steps, so what the simulator serves
is what `estimate` predicts.
"""

from __future__ import annotations

import collections
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from . import perf

MAX_NUM_SEQS = 256
MAX_BATCHED_TOKENS = 8192

# (tokens computed, context tokens the decode part attends, prompt attention pairs) -> seconds
StepTime = Callable[[int, int, float], float]


@dataclass(eq=False)
class Sequence:
    """One request inside the engine."""

    prompt_tokens: int
    max_tokens: int
    prefilled: int = 0
    generated: int = 0
    aborted: bool = False

    @property
    def decoding(self) -> bool:
        return self.prefilled >= self.prompt_tokens

    @property
    def done(self) -> bool:
        return self.generated >= self.max_tokens


@dataclass(frozen=True)
class Step:
    """What one step computes: prompt chunks, and the sequences that get a token at its end."""

    seconds: float
    chunks: tuple[tuple[Sequence, int], ...]
    advanced: tuple[Sequence, ...]


class Batcher:
    """The waiting queue and the running batch of one engine."""

    def __init__(
        self,
        step_time: StepTime,
        *,
        max_num_seqs: int = MAX_NUM_SEQS,
        max_batched_tokens: int = MAX_BATCHED_TOKENS,
    ) -> None:
        self.step_time = step_time
        self.max_num_seqs = max(1, max_num_seqs)
        self.max_batched_tokens = max(1, max_batched_tokens)
        self.waiting: collections.deque[Sequence] = collections.deque()
        self.running: list[Sequence] = []

    def __len__(self) -> int:
        return len(self.waiting) + len(self.running)

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def remove(self, seq: Sequence) -> None:
        """Drop a sequence (its client went away, or the server stopped)."""
        seq.aborted = True
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)

    def plan(self) -> Step | None:
        """The next step (None: nothing to do). Admits waiting sequences into the batch."""
        budget = self.max_batched_tokens
        decode = [s for s in self.running if s.decoding]
        budget -= len(decode)
        chunks: list[tuple[Sequence, int]] = []
        for seq in [s for s in self.running if not s.decoding]:
            if budget <= 0:
                break
            take = min(seq.prompt_tokens - seq.prefilled, budget)
            chunks.append((seq, take))
            budget -= take
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting.popleft()
            self.running.append(seq)
            take = min(seq.prompt_tokens - seq.prefilled, budget)
            chunks.append((seq, take))
            budget -= take
        if not decode and not chunks:
            return None
        tokens = len(decode) + sum(n for _, n in chunks)
        kv_tokens = sum(s.prompt_tokens + s.generated for s in decode)
        pairs = sum(n * (s.prefilled + n / 2) for s, n in chunks)
        finishing = [s for s, n in chunks if s.prefilled + n >= s.prompt_tokens]
        return Step(self.step_time(tokens, kv_tokens, pairs), tuple(chunks), (*decode, *finishing))

    def commit(self, step: Step) -> list[Sequence]:
        """Apply a step once its time has passed; returns the sequences it finished."""
        for seq, n in step.chunks:
            seq.prefilled += n
        finished = []
        for seq in step.advanced:
            if seq.aborted:
                continue
            seq.generated += 1
            if seq.done:
                finished.append(seq)
                self.running.remove(seq)
        return finished


def step_time_for(
    model: perf.ModelPerf,
    *,
    tp: int,
    interconnect: str = perf.HOST_INTERCONNECT,
    eager: bool = False,
    bandwidth: float = perf.MEMORY_BANDWIDTH,
) -> StepTime:
    def step_time(tokens: int, kv_tokens: int, pairs: float) -> float:
        return perf.step_cost(
            model,
            tp=tp,
            interconnect=interconnect,
            tokens=tokens,
            kv_tokens=kv_tokens,
            attention_pairs=pairs,
            eager=eager,
            bandwidth=bandwidth,
        ).seconds

    return step_time


# --- predicting a benchmark ----------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """What `vllm bench serve` (or the product's client) would report, in simulated seconds."""

    concurrency: int
    requests: int
    duration_s: float
    output_tok_s: float  # all output tokens over the benchmark's duration
    ttft_s: float  # mean
    tpot_s: float  # mean of each request's (e2el - ttft) / (output tokens - 1)
    e2el_s: float  # mean

    @property
    def per_stream_tok_s(self) -> float:
        return 1.0 / self.tpot_s if self.tpot_s > 0 else 0.0


@dataclass
class _Timing:
    sent: float
    first: float | None = None
    last: float = 0.0
    tokens: int = 0


@dataclass
class _Run:
    """A closed-loop benchmark being walked: each client sends its next request when one ends."""

    batcher: Batcher
    input_tokens: int
    output_tokens: int
    remaining: int
    clock: float = 0.0
    timings: dict[Sequence, _Timing] = field(default_factory=dict)

    def send(self) -> None:
        if self.remaining > 0:
            self.remaining -= 1
            seq = Sequence(self.input_tokens, self.output_tokens)
            self.timings[seq] = _Timing(sent=self.clock)
            self.batcher.add(seq)


def estimate(
    model_path: str,
    *,
    tp: int = 8,
    interconnect: str = perf.HOST_INTERCONNECT,
    concurrency: int = 1,
    input_tokens: int = 128,
    output_tokens: int = 256,
    num_requests: int | None = None,
    weights_gib: float | None = None,
) -> Estimate:
    """Walk a benchmark through the scheduler: C clients, back-to-back requests, no I/O."""
    model = perf.profile_for(model_path, weights_gib)
    batcher = Batcher(step_time_for(model, tp=tp, interconnect=interconnect))
    total = num_requests if num_requests is not None else concurrency
    run = _Run(batcher, max(1, input_tokens), max(1, output_tokens), total)
    for _ in range(min(concurrency, total)):
        run.send()
    while len(batcher):
        step = batcher.plan()
        if step is None:
            break
        run.clock += step.seconds
        for seq in step.advanced:
            timing = run.timings[seq]
            timing.first = run.clock if timing.first is None else timing.first
            timing.last, timing.tokens = run.clock, timing.tokens + 1
        for _seq in batcher.commit(step):
            run.send()
    timings = list(run.timings.values())
    ttfts = [(t.first or 0.0) - t.sent for t in timings]
    e2els = [t.last - t.sent for t in timings]
    tpots = [(t.last - (t.first or 0.0)) / (t.tokens - 1) for t in timings if t.tokens > 1] or [0.0]
    duration = run.clock
    return Estimate(
        concurrency=concurrency,
        requests=len(timings),
        duration_s=duration,
        output_tok_s=sum(t.tokens for t in timings) / duration if duration > 0 else 0.0,
        ttft_s=statistics.fmean(ttfts),
        tpot_s=statistics.fmean(tpots),
        e2el_s=statistics.fmean(e2els),
    )
