"""What a vLLM server logs from its start until the model begins to load."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import catalog
from . import log_format as fmt

if TYPE_CHECKING:
    from ..catalog import CatalogModel
    from ..state import Machine, Run
    from ..vllm_cli import EngineArgs


# What vLLM 0.32 masks in its "non-default args" line (api_utils._SENSITIVE_ARG_FIELDS).
LOGGED_AS_STARS = frozenset({"api_key", "hf_token", "watermark_config"})


def startup_lines(machine: Machine, run: Run, engine: EngineArgs) -> list[str]:
    wall = run.started_wall
    lines = _warnings(run, engine)
    if engine.exit_status is not None:
        return lines  # the command line ends it before the API server starts
    api = fmt.api(run)
    shown = [(k, "***" if k in LOGGED_AS_STARS else v) for k, v in engine.non_default]
    args = "{" + ", ".join(f"{k!r}: {v!r}" for k, v in shown) + "}"
    lines += [fmt.info(api, wall, "api_utils.py:347", line) for line in banner(engine)]
    lines.append(fmt.info(api, wall, "api_utils.py:286", f"non-default args: {args}"))
    model = catalog.MODELS_BY_PATH.get(engine.model_path.rstrip("/"))
    if model is None:
        return lines
    return lines + _config_lines(machine, run, engine, model) + _rank_lines(run, engine)


def banner(engine: EngineArgs) -> list[str]:
    """The logo vLLM 0.32 logs first, with its version and the model it serves."""
    return [
        "",
        "       █     █     █▄   ▄█",
        f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {catalog.VLLM_VERSION}",
        f"  █▄█▀ █     █     █     █  model   {engine.model_path}",
        "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀",
        "",
    ]


def _warnings(run: Run, engine: EngineArgs) -> list[str]:
    """What the command line parser logged before the API server named its process."""
    wall = run.started_wall
    return [f"WARNING {fmt.stamp(wall)} [argparse_utils.py:211] {w}" for w in engine.warnings]


def _config_lines(machine: Machine, run: Run, engine: EngineArgs, model: CatalogModel) -> list[str]:
    """The engine config as the API server resolves it and the EngineCore starts with it."""
    wall = run.started_wall
    api, core = fmt.api(run), fmt.core(run)
    tp, pp, dp = (
        engine.tensor_parallel_size,
        engine.pipeline_parallel_size,
        engine.data_parallel_size,
    )
    max_len = machine.max_model_len(engine)
    dtype = {"auto": "bfloat16", "half": "float16", "float": "float32"}.get(
        engine.dtype, engine.dtype
    )
    prefix_caching = engine.enable_prefix_caching is not False
    eager = (
        [
            fmt.info(
                api,
                wall,
                "vllm.py:1703",
                "Enforce eager set, disabling torch.compile, CUDAGraphs, and JIT kernel warmup. "
                "This is equivalent to setting -cc.mode=none -cc.cudagraph_mode=none and "
                "--kernel_config.enable_jit_warmup=False",
                level="WARNING",
            )
        ]
        if engine.enforce_eager
        else []
    )
    return [
        fmt.info(api, wall, "model.py:733", f"Resolved architecture: {model.architecture}"),
        fmt.info(api, wall, "model.py:2152", f"Using max model len {max_len}"),
        *eager,
        fmt.info(
            api,
            wall,
            "scheduler.py:205",
            "Chunked prefill is enabled with max_num_batched_tokens="
            f"{engine.max_num_batched_tokens or 8192}.",
        ),
        fmt.info(core, wall, "core.py:644", "Waiting for init message from front-end."),
        fmt.info(
            core,
            wall,
            "core.py:77",
            f"Initializing a V1 LLM engine (v{catalog.VLLM_VERSION}) with config: "
            f"model='{engine.model_path}', speculative_config=None, "
            f"tokenizer='{engine.tokenizer or engine.model_path}', skip_tokenizer_init=False, "
            f"tokenizer_mode=auto, revision=None, "
            f"trust_remote_code={engine.trust_remote_code}, dtype=torch.{dtype}, "
            f"max_seq_len={max_len}, download_dir=None, load_format={engine.load_format}, "
            f"tensor_parallel_size={tp}, pipeline_parallel_size={pp}, data_parallel_size={dp}, "
            f"disable_custom_all_reduce=False, quantization={model.quantization}, "
            f"enforce_eager={engine.enforce_eager}, kv_cache_dtype={engine.kv_cache_dtype}, "
            f"served_model_name={engine.served_name}, "
            f"enable_prefix_caching={prefix_caching}",
        ),
    ]


def _rank_lines(run: Run, engine: EngineArgs) -> list[str]:
    """Each GPU worker's place in the parallel layout (the first 16), then the load begins."""
    wall = run.started_wall
    world = engine.gpus_needed
    lines = []
    for rank in range(min(world, 16)):
        dp_rank, local = divmod(rank, engine.world_size)
        pp_rank, tp_rank = divmod(local, engine.tensor_parallel_size)
        lines.append(
            fmt.info(
                fmt.worker(run, rank),
                wall,
                "parallel_state.py:1208",
                f"rank {rank} in world size {world} is assigned as DP rank {dp_rank}, "
                f"PP rank {pp_rank}, TP rank {tp_rank}, EP rank {rank}",
            )
        )
    lines.append(
        fmt.info(
            fmt.worker(run, 0),
            wall,
            "gpu_model_runner.py:2602",
            f"Starting to load model {engine.model_path}...",
        )
    )
    return lines
