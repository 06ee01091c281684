"""/metrics: vLLM 0.32's Prometheus exposition, with the families the control plane reads.

Family names, types and label order (sorted by name) as the real-engine tier's capture shows
them (tests/simulator/test_capture_parity.py): a counter's and a histogram's `_created` samples
are gauge families of their own, and a subset of vLLM's families is shown, none it lacks.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from .. import scheduler, serving
from ..state import gpu_faults

if TYPE_CHECKING:
    from ..state import Machine, Run
    from ..vllm_cli import EngineArgs

# One sample: (its name, labels beyond engine and model, its value).
_Sample = tuple[str, str, float]

# Histogram buckets as vLLM 0.32 declares them (the token ones are 1-2-5 up to max_model_len).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
               7.5, 10.0, 20.0, 40.0, 80.0)  # fmt: skip
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
               60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip


def _num(value: float) -> str:
    """Sample values the way prometheus_client prints them (its floatToGoString)."""
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _labels(*pairs: str) -> str:
    """Labels as vLLM 0.32's exposition prints them: sorted by name (engine, finished_reason,
    le, model_name, ...)."""
    return ",".join(sorted(p for p in pairs if p))


class _Exposition:
    """The text being written: families of samples labelled with the engine and its model.

    As vLLM 0.32 exposes them, a counter `X_total` and a histogram `X` each have a gauge family
    of their own, `X_created`, holding when each series was created.
    """

    def __init__(self, engine_label: str, model_label: str, created: float) -> None:
        self.base = (engine_label, model_label)
        self.created = created
        self.lines: list[str] = []

    def _family(self, name: str, kind: str, help_text: str, samples: list[_Sample]) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for sample, extra, value in samples:
            self.lines.append(f"{sample}{{{_labels(*self.base, *extra.split(';'))}}} {_num(value)}")

    def gauge(self, name: str, help_text: str, value: float) -> None:
        self._family(name, "gauge", help_text, [(name, "", value)])

    def counter(self, name: str, help_text: str, values: dict[str, float]) -> None:
        """`values`: extra labels ("" for none) -> the count."""
        total = f"{name}_total"
        self._family(total, "counter", help_text, [(total, k, v) for k, v in values.items()])
        created = f"{name}_created"
        self._family(created, "gauge", help_text, [(created, k, self.created) for k in values])

    def histogram(
        self, name: str, help_text: str, buckets: tuple[float, ...], count: int, mean: float
    ) -> None:
        """A histogram of `count` observations, each taken as the mean (the simulator keeps
        counts and sums, not every observation)."""
        samples: list[_Sample] = [
            (f"{name}_bucket", f'le="{bound}"', float(count if mean <= bound else 0))
            for bound in buckets
        ]
        samples.append((f"{name}_bucket", 'le="+Inf"', float(count)))
        samples.append((f"{name}_count", "", float(count)))
        samples.append((f"{name}_sum", "", count * mean))
        self._family(name, "histogram", help_text, samples)
        created = f"{name}_created"
        self._family(created, "gauge", help_text, [(created, "", self.created)])


# The page each run printed last, and what it was printed from: a fleet's /metrics is scraped
# by every probe, and on a host with no traffic it is the same page every time. Rendering it
# was a seventh of the simulator's CPU per probe; a page is made again only when something it
# shows moved. Bounded: one entry per run, the oldest dropped (a run that ended goes so).
_PAGES: OrderedDict[int, tuple[Run, tuple[Any, ...], str]] = OrderedDict()
PAGES_MAX = 20_000


def metrics(machine: Machine, run: Run) -> str:
    engine = run.engine
    assert engine is not None
    gauges = _scheduler_gauges(machine, run)
    # everything the page is made of, besides the engine's own (frozen) arguments
    shown = (
        engine, run.started_wall, gauges, run.prompt_tokens, run.generation_tokens,
        tuple(run.finished.items()), machine.max_model_len(engine), run.budget_mib,
        run.weights_mib,
    )  # fmt: skip
    found = _PAGES.get(id(run))
    if found is not None and found[0] is run and found[1][0] is engine and found[1] == shown:
        _PAGES.move_to_end(id(run))
        return found[2]
    out = _Exposition('engine="0"', f'model_name="{engine.served_name}"', run.started_wall)
    out.lines += _process_lines(run.started_wall)
    _scheduler_families(out, *gauges)
    _token_families(out, run)
    _request_histograms(out, machine, run)
    out.lines.append(_cache_config_info(engine, run))
    page = "\n".join(out.lines) + "\n"
    _PAGES[id(run)] = (run, shown, page)
    _PAGES.move_to_end(id(run))
    while len(_PAGES) > PAGES_MAX:
        _PAGES.popitem(last=False)
    return page


def _process_lines(start: float) -> list[str]:
    """prometheus_client's own families about the Python process."""
    return [
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


def _scheduler_gauges(machine: Machine, run: Run) -> tuple[int, int, float]:
    """What the engine is doing now: (requests running, requests waiting, KV cache in use)."""
    # What a test set by hand, plus the requests the run's engine really holds.
    running = machine.inflight_running + serving.running_requests(machine, run)
    waiting = machine.inflight_waiting
    kv_usage = machine.kv_cache_usage()
    if gpu_faults.core_dead(run):  # nothing runs; what arrives queues up, and more keeps coming
        now = machine.clock()
        waiting += serving.running_requests(machine, run) + gpu_faults.waiting_requests(run, now)
        running, kv_usage = 0, 0.0
    return running, waiting, kv_usage


def _scheduler_families(out: _Exposition, running: int, waiting: int, kv_usage: float) -> None:
    """The gauges of what the engine is doing now: requests in flight, KV cache in use."""
    out.gauge(
        "vllm:num_requests_running", "Number of requests in model execution batches.", running
    )
    out.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", waiting)
    out.gauge(
        "vllm:kv_cache_usage_perc",
        "KV-cache usage. 1 means 100 percent usage.",
        kv_usage,
    )


def _token_families(out: _Exposition, run: Run) -> None:
    """The counters since the process started: prefix cache, tokens, finished requests."""
    queries = float(run.prompt_tokens)
    out.counter(
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        {"": queries},
    )
    out.counter(
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        {"": float(int(queries * 0.4))},
    )
    out.counter(
        "vllm:num_preemptions", "Cumulative number of preemption from the engine.", {"": 0.0}
    )
    out.counter(
        "vllm:prompt_tokens", "Number of prefill tokens processed.", {"": float(run.prompt_tokens)}
    )
    out.counter(
        "vllm:generation_tokens",
        "Number of generation tokens processed.",
        {"": float(run.generation_tokens)},
    )
    out.counter(
        "vllm:request_success",
        "Count of successfully processed requests.",
        {
            f'finished_reason="{reason}"': float(run.finished.get(reason, 0))
            for reason in ("abort", "length", "stop")
        },
    )


@functools.lru_cache(maxsize=256)
def _mean_timings(model_path: str, tp: int, prompt: int, output: int) -> tuple[float, float, float]:
    """(TTFT, ITL, end-to-end seconds) of a request of that size alone, from the perf model."""
    try:
        found = scheduler.estimate(model_path, tp=tp, input_tokens=prompt, output_tokens=output)
    except (KeyError, ValueError):
        return 0.0, 0.0, 0.0
    return found.ttft_s, found.tpot_s, found.e2el_s


def _request_histograms(out: _Exposition, machine: Machine, run: Run) -> None:
    """Per-request histograms: sizes, and the latencies the benchmark measures."""
    engine = run.engine
    assert engine is not None
    count = sum(run.finished.values())
    prompt = run.prompt_tokens / count if count else 0.0
    output = run.generation_tokens / count if count else 0.0
    sizes = _one_two_five(machine.max_model_len(engine))
    out.histogram(
        "vllm:request_prompt_tokens", "Number of prefill tokens processed.", sizes, count, prompt
    )
    out.histogram(
        "vllm:request_generation_tokens",
        "Number of generation tokens processed.",
        sizes,
        count,
        output,
    )
    ttft, itl, e2e = (
        _mean_timings(engine.model_path, engine.tensor_parallel_size, round(prompt), round(output))
        if count
        else (0.0, 0.0, 0.0)
    )
    out.histogram(
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        TTFT_BUCKETS,
        count,
        ttft,
    )
    out.histogram(
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        ITL_BUCKETS,
        count,
        itl,
    )
    out.histogram(
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        E2E_BUCKETS,
        count,
        e2e,
    )


def _one_two_five(limit: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, ... up to `limit`, as vLLM's token histograms are bucketed."""
    out: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > limit:
                return tuple(out)
            out.append(float(value))
        exponent += 1


def _cache_config_info(engine: EngineArgs, run: Run) -> str:
    """vllm:cache_config_info: vLLM 0.32's CacheConfig as labels (all of them, sorted)."""
    blocks = max(1, int((run.budget_mib - run.weights_mib) / 4))
    block_size = 64
    config = {
        "_block_size_resolved": "True",
        "block_size": str(block_size),
        "cache_dtype": engine.kv_cache_dtype,
        "cache_hit_alignment_tokens": "None",
        "effective_attention_block_size": str(block_size),
        "enable_mamba_shared_prefix_checkpoint": "False",
        "enable_prefix_caching": str(engine.enable_prefix_caching is not False),
        "engine": "0",
        "gpu_memory_utilization": str(engine.gpu_memory_utilization),
        "hash_block_size": str(block_size),
        "is_attention_free": "False",
        "kv_cache_dtype_skip_layers": "[]",
        "kv_cache_layout": "None",
        "kv_cache_max_concurrency": "None",
        "kv_cache_memory_bytes": "None",
        "kv_cache_size_tokens": str(blocks * block_size),
        "kv_offloading_backend": "native",
        "kv_offloading_size": "None",
        "kv_sharing_fast_prefill": "False",
        "mamba_block_size": "None",
        "mamba_cache_dtype": "auto",
        "mamba_cache_mode": "none",
        "mamba_page_size_padded": "None",
        "mamba_ssm_cache_dtype": "auto",
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(blocks),
        "num_gpu_blocks_override": "None",
        "prefix_cache_retention_interval": "None",
        "prefix_caching_hash_algo": "sha256",
        "prefix_match_unit": str(block_size),
        "replayssm_buffer_len": "None",
        "skip_page_size_padded": "False",
        "sliding_window": "None",
        "swa_bounded_replay": "False",
        "use_kda_recoverssm": "False",
        "use_replayssm": "False",
        "user_specified_block_size": "False",
    }
    labels = ",".join(f'{name}="{value}"' for name, value in sorted(config.items()))
    return (
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        "# TYPE vllm:cache_config_info gauge\n"
        f"vllm:cache_config_info{{{labels}}} 1.0"
    )
