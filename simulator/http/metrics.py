"""/metrics: vLLM's Prometheus exposition, with the families the control plane reads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import serving

if TYPE_CHECKING:
    from ..state import Machine, Run
    from ..vllm_cli import EngineArgs

# One sample: (its name, labels beyond engine and model, its value).
_Sample = tuple[str, str, float]


def _num(value: float) -> str:
    """Sample values the way prometheus_client prints them (its floatToGoString)."""
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


class _Exposition:
    """The text being written: families of samples labelled with the engine and its model."""

    def __init__(self, labels: str) -> None:
        self.labels = labels
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: list[_Sample]) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for sample, extra, value in samples:
            lab = self.labels + (f",{extra}" if extra else "")
            self.lines.append(f"{sample}{{{lab}}} {_num(value)}")


def metrics(machine: Machine, run: Run) -> str:
    engine = run.engine
    assert engine is not None
    out = _Exposition(f'engine="0",model_name="{engine.served_name}"')
    out.lines += _process_lines(run.started_wall)
    _scheduler_families(out, machine, run)
    _token_families(out, run)
    out.lines.append(_cache_config_info(engine, run))
    return "\n".join(out.lines) + "\n"


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


def _scheduler_families(out: _Exposition, machine: Machine, run: Run) -> None:
    """The gauges of what the engine is doing now: requests in flight, KV cache in use."""
    # What a test set by hand, plus the requests the run's engine really holds.
    running = machine.inflight_running + serving.running_requests(machine, run)
    waiting = machine.inflight_waiting
    out.family(
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        [("vllm:num_requests_running", "", running)],
    )
    out.family(
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        [("vllm:num_requests_waiting", "", waiting)],
    )
    out.family(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        [("vllm:kv_cache_usage_perc", "", machine.kv_cache_usage())],
    )


def _token_families(out: _Exposition, run: Run) -> None:
    """The counters since the process started: prefix cache, tokens, finished requests."""
    start = run.started_wall
    queries = float(run.prompt_tokens)
    out.family(
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        [
            ("vllm:prefix_cache_queries_total", "", queries),
            ("vllm:prefix_cache_queries_created", "", start),
        ],
    )
    out.family(
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        [
            ("vllm:prefix_cache_hits_total", "", float(int(queries * 0.4))),
            ("vllm:prefix_cache_hits_created", "", start),
        ],
    )
    out.family(
        "vllm:num_preemptions_total",
        "counter",
        "Cumulative number of preemption from the engine.",
        [("vllm:num_preemptions_total", "", 0.0), ("vllm:num_preemptions_created", "", start)],
    )
    out.family(
        "vllm:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
        [
            ("vllm:prompt_tokens_total", "", float(run.prompt_tokens)),
            ("vllm:prompt_tokens_created", "", start),
        ],
    )
    out.family(
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
    out.family(
        "vllm:request_success_total",
        "counter",
        "Count of successfully processed requests.",
        success,
    )


def _cache_config_info(engine: EngineArgs, run: Run) -> str:
    return (
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        "# TYPE vllm:cache_config_info gauge\n"
        f'vllm:cache_config_info{{block_size="64",cache_dtype="auto",'
        f'engine="0",gpu_memory_utilization="{engine.gpu_memory_utilization}",'
        f'num_gpu_blocks="{max(1, int((run.budget_mib - run.weights_mib) / 4))}",'
        f'prefix_caching_hash_algo="sha256",swap_space="4"}} 1.0'
    )
