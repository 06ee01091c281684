"""What a vLLM server logs once its model has loaded: the KV cache, then the API server up."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import log_format as fmt

if TYPE_CHECKING:
    from ..state import Machine, Run
    from ..vllm_cli import EngineArgs


def ready_lines(machine: Machine, run: Run, ready_mono: float) -> list[str]:
    engine = run.engine
    if engine is None:
        return []
    wall = machine.wall_of(ready_mono)
    seconds = max(0.01, wall - run.started_wall)
    tp = engine.tensor_parallel_size
    core, w0 = fmt.core(run), fmt.worker(run, 0)
    weights_gib = run.weights_mib / fmt.GIB
    kv_gib = max(0.0, (run.budget_mib - run.weights_mib - 1800 - 620) / fmt.GIB)
    max_len = machine.max_model_len(engine)
    per_token_kib = 35 if engine.kv_cache_dtype.startswith("fp8") else 70  # MLA cache, per rank
    tokens = int(kv_gib * 1024 * 1024 * tp / per_token_kib)
    loaded = [
        fmt.info(
            w0, wall, "default_loader.py:267", f"Loading weights took {seconds * 0.7:.2f} seconds"
        ),
        fmt.info(
            w0,
            wall,
            "gpu_model_runner.py:2653",
            f"Model loading took {weights_gib:.4f} GiB and {seconds * 0.75:.6f} seconds",
        ),
        fmt.info(w0, wall, "gpu_worker.py:298", f"Available KV cache memory: {kv_gib:.2f} GiB"),
        fmt.info(core, wall, "kv_cache_utils.py:1087", f"GPU KV cache size: {tokens:,} tokens"),
        fmt.info(
            core,
            wall,
            "kv_cache_utils.py:1091",
            f"Maximum concurrency for {max_len:,} tokens per request: {tokens / max_len:.2f}x",
        ),
        fmt.info(
            core,
            wall,
            "core.py:210",
            "init engine (profile, create kv cache, warmup model) took "
            f"{seconds * 0.25:.2f} seconds",
        ),
    ]
    if engine.headless:
        return loaded  # engines only: no API server comes up
    return loaded + _api_server_up(run, engine, wall)


def _api_server_up(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    """vLLM 0.32's last lines before it serves; uvicorn's own are not prefixed."""
    api = fmt.api(run)
    return [
        fmt.info(api, wall, "entry.py:136", "Supported tasks: ['generate']"),
        fmt.info(api, wall, "entry.py:140", f"Starting vLLM server on {_listen_address(engine)}"),
        *fmt.uvicorn_routes(api, wall),
        f"{fmt.UVICORN}Started server process [{run.pid}]",
        f"{fmt.UVICORN}Waiting for application startup.",
        f"{fmt.UVICORN}Application startup complete.",
    ]


def _listen_address(engine: EngineArgs) -> str:
    """How vLLM's API server names where it listens."""
    if engine.uds is not None:
        return f"unix:{engine.uds}"
    host = engine.host or "0.0.0.0"  # noqa: S104 - a log line
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{engine.port}"
