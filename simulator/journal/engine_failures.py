"""Failures once the engine runs: a GPU worker fails to start or dies, and the engine with it.

The root cause comes first, prefixed with the worker (or EngineCore) that raised it, then the
EngineCore and the API server report the engine gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import log_format as fmt
from .log_format import CLI_FRAMES, Frame

if TYPE_CHECKING:
    from ..state import Run
    from ..vllm_cli import EngineArgs

# The EngineCore waiting for its GPU workers to come up.
_CORE_FRAMES: tuple[Frame, ...] = (
    (
        "vllm/v1/engine/core.py",
        699,
        "run_engine_core",
        "engine_core = EngineCoreProc(*args, **kwargs)",
    ),
    (
        "vllm/v1/engine/core.py",
        498,
        "__init__",
        "super().__init__(vllm_config, executor_class, log_stats,",
    ),
    ("vllm/v1/engine/core.py", 83, "__init__", "self.model_executor = executor_class(vllm_config)"),
    ("vllm/executor/executor_base.py", 54, "__init__", "self._init_executor()"),
    (
        "vllm/v1/executor/multiproc_executor.py",
        106,
        "_init_executor",
        "self.workers = WorkerProc.wait_for_ready(unready_workers)",
    ),
    ("vllm/v1/executor/multiproc_executor.py", 509, "wait_for_ready", "raise e from None"),
)
# A GPU worker from its start to allocating the model's weights on the GPU.
_LOAD_FRAMES: tuple[Frame, ...] = (
    (
        "vllm/v1/executor/multiproc_executor.py",
        645,
        "worker_main",
        "worker = WorkerProc(*args, **kwargs)",
    ),
    ("vllm/v1/executor/multiproc_executor.py", 491, "__init__", "self.worker.load_model()"),
    (
        "vllm/v1/worker/gpu_worker.py",
        233,
        "load_model",
        "self.model_runner.load_model(eep_scale_up=eep_scale_up)",
    ),
    (
        "vllm/v1/worker/gpu_model_runner.py",
        2641,
        "load_model",
        "self.model = model_loader.load_model(",
    ),
    (
        "vllm/model_executor/model_loader/base_loader.py",
        49,
        "load_model",
        "model = initialize_model(vllm_config=vllm_config,",
    ),
    (
        "vllm/model_executor/layers/fused_moe/layer.py",
        1093,
        "__init__",
        "self.quant_method.create_weights(layer=self, **moe_quant_params)",
    ),
    ("torch/utils/_device.py", 104, "__torch_function__", "return func(*args, **kwargs)"),
)


def _engine_died(run: Run, wall: float) -> list[str]:
    core, api = fmt.core(run), fmt.api(run)
    lines = [fmt.info(core, wall, "core.py:708", "EngineCore failed to start.", level="ERROR")]
    lines += fmt.prefixed(
        core,
        [
            "Traceback (most recent call last):",
            *fmt.frames(*_CORE_FRAMES),
            "Exception: WorkerProc initialization failed due to an exception in a background "
            "process. See stack trace for root cause.",
        ],
    )
    lines += fmt.prefixed(
        api,
        [
            "Traceback (most recent call last):",
            *fmt.frames(
                *CLI_FRAMES,
                (
                    "vllm/v1/engine/utils.py",
                    878,
                    "wait_for_engine_startup",
                    "raise RuntimeError(",
                ),
            ),
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {}",
        ],
    )
    return lines


def _worker_error(run: Run, wall: float, frames: list[str], error: str) -> list[str]:
    w0 = fmt.worker(run, 0)
    lines = [
        fmt.info(w0, wall, "multiproc_executor.py:671", "WorkerProc failed to start.", "ERROR")
    ]
    lines += fmt.prefixed(w0, ["Traceback (most recent call last):", *frames, *error.split("\n")])
    return lines


def out_of_memory(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    """The weights do not fit: CUDA runs out of memory while the model is built."""
    total_gib = run.gpu_total_mib / fmt.GIB
    in_use = (run.gpu_total_mib - 900) / 1024
    message = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a "
        f"total capacity of {total_gib:.2f} GiB of which 612.44 MiB is free. Including "
        f"non-PyTorch memory, this process has {in_use:.2f} GiB memory in use. Of the "
        f"allocated memory {in_use - 0.7:.2f} GiB is allocated by PyTorch, and 102.50 MiB is "
        "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
        "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
    return _worker_error(run, wall, fmt.frames(*_LOAD_FRAMES), message) + _engine_died(run, wall)


def not_enough_free_memory(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    """Another process holds memory the worker's --gpu-memory-utilization needs."""
    util = engine.gpu_memory_utilization
    total_gib = run.gpu_total_mib / fmt.GIB
    free_mib = run.free_mib if run.free_mib is not None else total_gib * (1 - util) * 800
    free = max(0, free_mib) / fmt.GIB
    message = (
        f"ValueError: Free memory on device ({free:.2f}/{total_gib:.2f} GiB) on startup is "
        f"less than desired GPU memory utilization ({util}, {util * total_gib:.2f} GiB). "
        "Decrease GPU memory utilization or reduce GPU memory used by other processes."
    )
    frames = fmt.frames(
        (
            "vllm/v1/executor/multiproc_executor.py",
            645,
            "worker_main",
            "worker = WorkerProc(*args, **kwargs)",
        ),
        (
            "vllm/v1/executor/multiproc_executor.py",
            485,
            "__init__",
            "self.worker.init_device()",
        ),
        ("vllm/v1/worker/gpu_worker.py", 203, "init_device", "raise ValueError("),
    )
    return _worker_error(run, wall, frames, message) + _engine_died(run, wall)


def no_kv_cache(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    """The weights fit, but nothing is left for the KV cache after profiling."""
    frames = fmt.frames(
        ("vllm/v1/engine/core.py", 92, "__init__", "self._initialize_kv_caches(vllm_config)"),
        (
            "vllm/v1/engine/core.py",
            199,
            "_initialize_kv_caches",
            "kv_cache_configs = get_kv_cache_configs(",
        ),
        (
            "vllm/v1/core/kv_cache_utils.py",
            680,
            "check_enough_kv_cache_memory",
            "raise ValueError(",
        ),
    )
    lines = fmt.prefixed(
        fmt.core(run),
        [
            "Traceback (most recent call last):",
            *frames,
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine.",
        ],
    )
    return lines + _engine_died(run, wall)[-6:]


def worker_crash(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    """An engine worker dies during warmup (the `crash_on_start` fault, or a kill)."""
    rank = min(3, max(1, len(run.gpus)) - 1)
    wr = fmt.worker(run, rank)
    frames = fmt.frames(
        (
            "vllm/v1/executor/multiproc_executor.py",
            666,
            "worker_busy_loop",
            "output = func(*args, **kwargs)",
        ),
        (
            "vllm/v1/worker/gpu_worker.py",
            387,
            "compile_or_warm_up_model",
            "self.model_runner.capture_model()",
        ),
        (
            "vllm/distributed/device_communicators/pynccl.py",
            136,
            "all_reduce",
            "self.nccl.ncclAllReduce(buffer_type(in_tensor.data_ptr()),",
        ),
        (
            "vllm/distributed/device_communicators/pynccl_wrapper.py",
            356,
            "NCCL_CHECK",
            'raise RuntimeError(f"NCCL error: {error_str}")',
        ),
    )
    lines = [
        fmt.info(wr, wall, "multiproc_executor.py:671", "WorkerProc hit an exception.", "ERROR")
    ]
    lines += fmt.prefixed(
        wr,
        [
            "Traceback (most recent call last):",
            *frames,
            "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        ],
    )
    return lines + _engine_dead(run, wall)


def _engine_dead(run: Run, wall: float) -> list[str]:
    """The EngineCore and then the API server notice a dead worker of a running engine."""
    core = fmt.core(run)
    lines = [fmt.info(core, wall, "core.py:776", "EngineCore encountered a fatal error.", "ERROR")]
    lines += fmt.prefixed(
        core,
        [
            "Traceback (most recent call last):",
            *fmt.frames(
                ("vllm/v1/engine/core.py", 767, "run_engine_core", "engine_core.run_busy_loop()")
            ),
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
            "stack trace (above) for the root cause.",
        ],
    )
    api = fmt.api(run)
    lines.append(
        f"{api} ERROR {fmt.stamp(wall)} [async_llm.py:480] AsyncLLM output_handler failed."
    )
    return lines
