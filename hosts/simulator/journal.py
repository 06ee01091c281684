"""The lines a vLLM server writes to the journal while it starts, serves, stops and dies.

Operators read these in the control plane when a change fails, so they follow vLLM 0.11's real
shapes (process prefixes, logger format, Python tracebacks) closely enough to be recognised.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from . import catalog
from .vllm_cli import (
    MAIN_USAGE,
    SERVE_USAGE,
    core_pid,
    core_title,
    help_lines,
    worker_pid,
    worker_title,
)

if TYPE_CHECKING:
    from .state import EngineArgs, Machine, Run

SITE = "/opt/vllm/.venv/lib/python3.12/site-packages"
GIB = 1024.0
TOTAL_GIB = 97887 / 1024


def _stamp(wall: float) -> str:
    return dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%m-%d %H:%M:%S")


def _info(prefix: str, wall: float, where: str, message: str, level: str = "INFO") -> str:
    return f"{prefix} {level} {_stamp(wall)} [{where}] {message}"


def _api(run: Run) -> str:
    return f"(APIServer pid={run.pid})"


def _core(run: Run, dp_rank: int = 0) -> str:
    assert run.engine is not None
    return f"({core_title(dp_rank)} pid={core_pid(run.engine, run.pid, dp_rank)})"


def _worker(run: Run, rank: int) -> str:
    assert run.engine is not None
    return f"({worker_title(run.engine, rank)} pid={worker_pid(run.engine, run.pid, rank)})"


def _listen_address(engine: EngineArgs) -> str:
    """How vLLM's API server names where it listens."""
    if engine.uds is not None:
        return f"unix:{engine.uds}"
    host = engine.host or "0.0.0.0"  # noqa: S104 - a log line
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{engine.port}"


def _warnings(run: Run, engine: EngineArgs) -> list[str]:
    """What the command line parser logged before the API server named its process."""
    wall = run.started_wall
    return [f"WARNING {_stamp(wall)} [argparse_utils.py:211] {w}" for w in engine.warnings]


def _prefixed(prefix: str, lines: list[str]) -> list[str]:
    return [f"{prefix} {line}" for line in lines]


def startup_lines(machine: Machine, unit: str, run: Run, engine: EngineArgs) -> list[str]:
    wall = run.started_wall
    lines = _warnings(run, engine)
    if engine.exit_status is not None:
        return lines  # the command line ends it before the API server starts
    api = _api(run)
    args = "{" + ", ".join(f"{k!r}: {v!r}" for k, v in engine.non_default) + "}"
    lines += [
        _info(api, wall, "api_server.py:1839", f"vLLM API server version {catalog.VLLM_VERSION}"),
        _info(api, wall, "utils.py:233", f"non-default args: {args}"),
    ]
    model = catalog.MODELS_BY_PATH.get(engine.model_path.rstrip("/"))
    if model is None:
        return lines
    tp, pp, dp = (
        engine.tensor_parallel_size,
        engine.pipeline_parallel_size,
        engine.data_parallel_size,
    )
    max_len = machine.max_model_len(engine)
    core = _core(run)
    dtype = {"auto": "bfloat16", "half": "float16", "float": "float32"}.get(
        engine.dtype, engine.dtype
    )
    prefix_caching = engine.enable_prefix_caching is not False
    lines += [
        _info(api, wall, "model.py:547", f"Resolved architecture: {model.architecture}"),
        _info(api, wall, "model.py:1510", f"Using max model len {max_len}"),
        _info(
            api,
            wall,
            "scheduler.py:205",
            "Chunked prefill is enabled with max_num_batched_tokens="
            f"{engine.max_num_batched_tokens or 8192}.",
        ),
        _info(core, wall, "core.py:644", "Waiting for init message from front-end."),
        _info(
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
    world = engine.gpus_needed
    for rank in range(min(world, 16)):
        dp_rank, local = divmod(rank, engine.world_size)
        pp_rank, tp_rank = divmod(local, tp)
        lines.append(
            _info(
                _worker(run, rank),
                wall,
                "parallel_state.py:1208",
                f"rank {rank} in world size {world} is assigned as DP rank {dp_rank}, "
                f"PP rank {pp_rank}, TP rank {tp_rank}, EP rank {rank}",
            )
        )
    lines.append(
        _info(
            _worker(run, 0),
            wall,
            "gpu_model_runner.py:2602",
            f"Starting to load model {engine.model_path}...",
        )
    )
    return lines


def ready_lines(machine: Machine, unit: str, run: Run, ready_mono: float) -> list[str]:
    engine = run.engine
    if engine is None:
        return []
    wall = machine._wall_of(ready_mono)
    seconds = max(0.01, wall - run.started_wall)
    tp = engine.tensor_parallel_size
    api, core, w0 = _api(run), _core(run), _worker(run, 0)
    weights_gib = run.weights_mib / GIB
    kv_gib = max(0.0, (run.budget_mib - run.weights_mib - 1800 - 620) / GIB)
    max_len = machine.max_model_len(engine)
    per_token_kib = 35 if engine.kv_cache_dtype.startswith("fp8") else 70  # MLA cache, per rank
    tokens = int(kv_gib * 1024 * 1024 * tp / per_token_kib)
    loaded = [
        _info(
            w0, wall, "default_loader.py:267", f"Loading weights took {seconds * 0.7:.2f} seconds"
        ),
        _info(
            w0,
            wall,
            "gpu_model_runner.py:2653",
            f"Model loading took {weights_gib:.4f} GiB and {seconds * 0.75:.6f} seconds",
        ),
        _info(w0, wall, "gpu_worker.py:298", f"Available KV cache memory: {kv_gib:.2f} GiB"),
        _info(core, wall, "kv_cache_utils.py:1087", f"GPU KV cache size: {tokens:,} tokens"),
        _info(
            core,
            wall,
            "kv_cache_utils.py:1091",
            f"Maximum concurrency for {max_len:,} tokens per request: {tokens / max_len:.2f}x",
        ),
        _info(
            core,
            wall,
            "core.py:210",
            "init engine (profile, create kv cache, warmup model) took "
            f"{seconds * 0.25:.2f} seconds",
        ),
    ]
    if engine.headless:
        return loaded  # engines only: no API server comes up
    return [
        *loaded,
        _info(api, wall, "api_server.py:1634", "Supported_tasks: ['generate']"),
        _info(
            api,
            wall,
            "api_server.py:1912",
            f"Starting vLLM API server 0 on {_listen_address(engine)}",
        ),
        f"{api} INFO:     Started server process [{run.pid}]",
        f"{api} INFO:     Waiting for application startup.",
        f"{api} INFO:     Application startup complete.",
    ]


def shutdown_lines(run: Run, now: float) -> list[str]:
    api = _api(run)
    return [
        f"{api} INFO:     Shutting down",
        f"{api} INFO:     Waiting for application shutdown.",
        f"{api} INFO:     Application shutdown complete.",
    ]


def _frames(*frames: tuple[str, int, str, str]) -> list[str]:
    lines = []
    for path, line, func, code in frames:
        full = path if path.startswith("/") else f"{SITE}/{path}"
        lines.append(f'  File "{full}", line {line}, in {func}')
        lines.append(f"    {code}")
    return lines


_CLI_FRAMES = (
    ("/opt/vllm/.venv/bin/vllm", 10, "<module>", "sys.exit(main())"),
    ("vllm/entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
    ("vllm/entrypoints/cli/serve.py", 60, "cmd", "uvloop.run(run_server(args))"),
)

_CORE_FRAMES = (
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


def _engine_died(run: Run, wall: float) -> list[str]:
    core, api = _core(run), _api(run)
    lines = [_info(core, wall, "core.py:708", "EngineCore failed to start.", level="ERROR")]
    lines += _prefixed(
        core,
        [
            "Traceback (most recent call last):",
            *_frames(*_CORE_FRAMES),
            "Exception: WorkerProc initialization failed due to an exception in a background "
            "process. See stack trace for root cause.",
        ],
    )
    lines += _prefixed(
        api,
        [
            "Traceback (most recent call last):",
            *_frames(
                *_CLI_FRAMES,
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
    w0 = _worker(run, 0)
    lines = [_info(w0, wall, "multiproc_executor.py:671", "WorkerProc failed to start.", "ERROR")]
    lines += _prefixed(w0, ["Traceback (most recent call last):", *frames, *error.split("\n")])
    return lines


_MAIN_FRAMES = (
    ("/opt/vllm/.venv/bin/vllm", 10, "<module>", "sys.exit(main())"),
    ("vllm/entrypoints/cli/main.py", 46, "main", "args = parser.parse_args()"),
)
# Where each function that can fail before the server starts sits, and who called it.
_CLI_WHERE: dict[str, tuple[tuple[str, int, str, str], ...]] = {
    "parse_args": _MAIN_FRAMES,
    "_pull_args_from_config": (
        *_MAIN_FRAMES,
        (
            "vllm/utils/argparse_utils.py",
            218,
            "parse_args",
            "args = self._pull_args_from_config(args)",
        ),
    ),
    "load_config_file": (
        *_MAIN_FRAMES,
        (
            "vllm/utils/argparse_utils.py",
            218,
            "parse_args",
            "args = self._pull_args_from_config(args)",
        ),
        (
            "vllm/utils/argparse_utils.py",
            362,
            "_pull_args_from_config",
            "config_args = self.load_config_file(file_path)",
        ),
    ),
    "validate_parsed_serve_args": (
        ("/opt/vllm/.venv/bin/vllm", 10, "<module>", "sys.exit(main())"),
        ("vllm/entrypoints/cli/main.py", 70, "main", "cmds[args.subparser].validate(args)"),
        ("vllm/entrypoints/cli/serve.py", 74, "validate", "validate_parsed_serve_args(args)"),
    ),
    "validate_chat_template": (
        ("/opt/vllm/.venv/bin/vllm", 10, "<module>", "sys.exit(main())"),
        ("vllm/entrypoints/cli/main.py", 70, "main", "cmds[args.subparser].validate(args)"),
        ("vllm/entrypoints/cli/serve.py", 74, "validate", "validate_parsed_serve_args(args)"),
        (
            "vllm/entrypoints/openai/cli_args.py",
            288,
            "validate_parsed_serve_args",
            "validate_chat_template(args.chat_template)",
        ),
    ),
}
_CLI_LINES = {
    "parse_args": 207,
    "_pull_args_from_config": 352,
    "load_config_file": 437,
    "validate_parsed_serve_args": 293,
    "validate_chat_template": 1031,
}
_CLI_FILES = {
    "parse_args": "vllm/utils/argparse_utils.py",
    "_pull_args_from_config": "vllm/utils/argparse_utils.py",
    "load_config_file": "vllm/utils/argparse_utils.py",
    "validate_parsed_serve_args": "vllm/entrypoints/openai/cli_args.py",
    "validate_chat_template": "vllm/entrypoints/chat_utils.py",
}


def _cli_failure(engine: EngineArgs, wall: float) -> list[str]:
    """A traceback from vLLM's command line handling: no process prefix, nothing started."""
    failure = engine.cli_failure
    assert failure is not None
    lines = []
    if failure.logged:
        lines.append(f"ERROR {_stamp(wall)} [argparse_utils.py:443] {failure.logged}")
    frames = _CLI_WHERE.get(failure.where, _MAIN_FRAMES)
    here = (
        _CLI_FILES.get(failure.where, "vllm/utils/argparse_utils.py"),
        _CLI_LINES.get(failure.where, 207),
        failure.where,
        failure.code,
    )
    return [
        *lines,
        "Traceback (most recent call last):",
        *_frames(*frames, here),
        *failure.exception.split("\n"),
    ]


def _missing_model_error(path: str) -> list[str]:
    """A model path that is not on disk: a local path is missing, a hub id needs the network."""
    if path.startswith("/") or path.startswith("."):
        config = f"{path.rstrip('/')}/config.json"
        return [f"FileNotFoundError: [Errno 2] No such file or directory: '{config}'"]
    return [
        "OSError: We couldn't connect to 'https://huggingface.co' to load the files, and "
        "couldn't find them in the cached files.",
        "Check your internet connection or see how to run the library in offline mode at "
        "'https://huggingface.co/docs/transformers/installation#offline-mode'.",
    ]


def _config_error(api: str, where: str, code: str, error: str) -> list[str]:
    """An exception while the API server builds the engine config."""
    return _prefixed(
        api,
        [
            "Traceback (most recent call last):",
            *_frames(
                *_CLI_FRAMES,
                ("vllm/engine/arg_utils.py", 1136, "create_model_config", "return ModelConfig("),
                (where, 1, "__post_init__", code),
            ),
            *error.split("\n"),
        ],
    )


def failure_lines(machine: Machine, unit: str, run: Run, kind: str, at: float) -> list[str]:
    engine = run.engine
    wall = machine._wall_of(at)
    api = _api(run)
    if kind == "exec" or engine is None:
        return []
    if kind == "help":
        return help_lines()
    if kind == "usage":
        usage = MAIN_USAGE if engine.usage_prog == "vllm" else SERVE_USAGE
        return [f"usage: {usage}", f"{engine.usage_prog}: error: {engine.usage_error}"]
    if kind == "cli":
        return _cli_failure(engine, wall)
    if kind == "config":
        value = engine.gpu_memory_utilization
        if value > 1:
            rule = "less than or equal to 1 [type=less_than_equal"
        else:
            rule = "greater than 0 [type=greater_than"
        return _prefixed(
            api,
            [
                "Traceback (most recent call last):",
                *_frames(
                    *_CLI_FRAMES,
                    (
                        "vllm/engine/arg_utils.py",
                        1384,
                        "create_engine_config",
                        "cache_config = CacheConfig(",
                    ),
                ),
                "pydantic_core._pydantic_core.ValidationError: 1 validation error for CacheConfig",
                "gpu_memory_utilization",
                f"  Input should be {rule}, input_value={value}, input_type=float]",
            ],
        )
    if kind == "world_size":
        return _prefixed(
            api,
            [
                "Traceback (most recent call last):",
                *_frames(
                    *_CLI_FRAMES,
                    ("vllm/config/parallel.py", 452, "__post_init__", "raise ValueError("),
                ),
                f"ValueError: World size ({engine.world_size}) is larger than the number of "
                f"available GPUs ({len(run.visible)}) in this node. If this is intentional and "
                "you are using:",
                "- ray, set '--distributed-executor-backend ray'.",
                "- multiprocessing, set '--nnodes' appropriately.",
            ],
        )
    if kind == "dp_world_size":
        ws, dp = engine.world_size, engine.data_parallel_size
        base = ",".join(str(g) for g in run.visible)
        last = dp - 1
        for d in range(dp):
            if (d + 1) * ws > len(run.visible):
                last = d
                break
        return _prefixed(
            api,
            [
                "Traceback (most recent call last):",
                *_frames(
                    *_CLI_FRAMES,
                    (
                        "vllm/v1/engine/utils.py",
                        126,
                        "__init__",
                        "with set_device_control_env_var(vllm_config, local_dp_rank):",
                    ),
                    ("vllm/v1/engine/utils.py", 186, "get_device_indices", "raise Exception("),
                ),
                "Exception: Error setting CUDA_VISIBLE_DEVICES: local range: "
                f'[{last * ws}, {(last + 1) * ws}) base value: "{base}"',
            ],
        )
    if kind == "port_range":
        return _prefixed(
            api,
            [
                "Traceback (most recent call last):",
                *_frames(
                    *_CLI_FRAMES,
                    (
                        "vllm/entrypoints/openai/api_server.py",
                        1874,
                        "create_server_socket",
                        "sock.bind(addr)",
                    ),
                ),
                "OverflowError: bind(): port must be 0-65535.",
            ],
        )
    if kind == "quantization":
        model = catalog.MODELS_BY_PATH.get(engine.model_path.rstrip("/"))
        method = model.quantization if model else "None"
        return _config_error(
            api,
            "vllm/config/model.py",
            "self._verify_quantization()",
            f"ValueError: Quantization method specified in the model config ({method}) does not "
            "match the quantization method specified in the `quantization` argument "
            f"({engine.quantization}).",
        )
    if kind == "missing_tokenizer":
        path = (engine.tokenizer or "").rstrip("/")
        return _prefixed(
            api,
            [
                "Traceback (most recent call last):",
                *_frames(
                    *_CLI_FRAMES,
                    (
                        "vllm/transformers_utils/tokenizer.py",
                        269,
                        "get_tokenizer",
                        "tokenizer = AutoTokenizer.from_pretrained(",
                    ),
                ),
                f"OSError: Can't load tokenizer for '{path}'. If you were trying to load it from "
                "'https://huggingface.co/models', make sure you don't have a local directory "
                f"with the same name. Otherwise, make sure '{path}' is the correct path to a "
                "directory containing all relevant files for a PreTrainedTokenizerFast "
                "tokenizer.",
            ],
        )
    if kind == "port":
        return _prefixed(
            api,
            [
                "Traceback (most recent call last):",
                *_frames(
                    *_CLI_FRAMES,
                    (
                        "vllm/entrypoints/openai/api_server.py",
                        1874,
                        "create_server_socket",
                        "sock.bind(addr)",
                    ),
                ),
                "OSError: [Errno 98] Address already in use",
            ],
        )
    if kind == "missing_model":
        return _prefixed(
            api,
            [
                "Traceback (most recent call last):",
                *_frames(
                    *_CLI_FRAMES,
                    (
                        "vllm/engine/arg_utils.py",
                        1136,
                        "create_model_config",
                        "return ModelConfig(",
                    ),
                    (
                        "vllm/transformers_utils/config.py",
                        533,
                        "get_config",
                        "config_dict, _ = PretrainedConfig.get_config_dict(",
                    ),
                    (
                        "transformers/configuration_utils.py",
                        721,
                        "_get_config_dict",
                        "resolved_config_file = cached_file(",
                    ),
                ),
                *_missing_model_error(engine.model_path),
            ],
        )
    worker_frames = _frames(
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
    if kind == "oom":
        in_use = (97887 - 900) / 1024
        message = (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a "
            f"total capacity of {TOTAL_GIB:.2f} GiB of which 612.44 MiB is free. Including "
            f"non-PyTorch memory, this process has {in_use:.2f} GiB memory in use. Of the "
            f"allocated memory {in_use - 0.7:.2f} GiB is allocated by PyTorch, and 102.50 MiB is "
            "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
            "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
            "documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        )
        return _worker_error(run, wall, worker_frames, message) + _engine_died(run, wall)
    if kind == "free_memory":
        util = engine.gpu_memory_utilization
        free_mib = run.free_mib if run.free_mib is not None else TOTAL_GIB * (1 - util) * 800
        free = max(0, free_mib) / GIB
        message = (
            f"ValueError: Free memory on device ({free:.2f}/{TOTAL_GIB:.2f} GiB) on startup is "
            f"less than desired GPU memory utilization ({util}, {util * TOTAL_GIB:.2f} GiB). "
            "Decrease GPU memory utilization or reduce GPU memory used by other processes."
        )
        frames = _frames(
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
    if kind == "no_kv_cache":
        frames = _frames(
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
        core = _core(run)
        return (
            _prefixed(
                core,
                [
                    "Traceback (most recent call last):",
                    *frames,
                    "ValueError: No available memory for the cache blocks. Try increasing "
                    "`gpu_memory_utilization` when initializing the engine.",
                ],
            )
            + _engine_died(run, wall)[-6:]
        )
    # crash: an engine worker dies during warmup (the `crash_on_start` fault, or a kill)
    rank = min(3, max(1, len(run.gpus)) - 1)
    wr = _worker(run, rank)
    frames = _frames(
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
    lines = [_info(wr, wall, "multiproc_executor.py:671", "WorkerProc hit an exception.", "ERROR")]
    lines += _prefixed(
        wr,
        [
            "Traceback (most recent call last):",
            *frames,
            "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        ],
    )
    core = _core(run)
    lines.append(_info(core, wall, "core.py:776", "EngineCore encountered a fatal error.", "ERROR"))
    lines += _prefixed(
        core,
        [
            "Traceback (most recent call last):",
            *_frames(
                ("vllm/v1/engine/core.py", 767, "run_engine_core", "engine_core.run_busy_loop()")
            ),
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
            "stack trace (above) for the root cause.",
        ],
    )
    lines.append(f"{api} ERROR {_stamp(wall)} [async_llm.py:480] AsyncLLM output_handler failed.")
    return lines
