"""Failures of the API server before any engine starts: its socket, the engine config, the model.

Each is one Python traceback from `vllm serve`'s coroutine, prefixed with the API server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import catalog
from . import log_format as fmt
from .log_format import CLI_FRAMES, Frame

if TYPE_CHECKING:
    from ..state import Run
    from ..vllm_cli import EngineArgs

_BIND_FRAME: Frame = (
    "vllm/entrypoints/openai/api_server.py",
    1874,
    "create_server_socket",
    "sock.bind(addr)",
)
_MODEL_CONFIG_FRAME: Frame = (
    "vllm/engine/arg_utils.py",
    1136,
    "create_model_config",
    "return ModelConfig(",
)


def _traceback(run: Run, frames: list[Frame], error: list[str]) -> list[str]:
    """The API server's traceback from `vllm serve` down through `frames`, then the error."""
    return fmt.prefixed(
        fmt.api(run),
        ["Traceback (most recent call last):", *fmt.frames(*CLI_FRAMES, *frames), *error],
    )


def bad_memory_utilization(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    value = engine.gpu_memory_utilization
    if value > 1:
        rule = "less than or equal to 1 [type=less_than_equal"
    else:
        rule = "greater than 0 [type=greater_than"
    return _traceback(
        run,
        [("vllm/engine/arg_utils.py", 1384, "create_engine_config", "cache_config = CacheConfig(")],
        [
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for CacheConfig",
            "gpu_memory_utilization",
            f"  Input should be {rule}, input_value={value}, input_type=float]",
        ],
    )


def world_too_large(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    return _traceback(
        run,
        [("vllm/config/parallel.py", 452, "__post_init__", "raise ValueError(")],
        [
            f"ValueError: World size ({engine.world_size}) is larger than the number of "
            f"available GPUs ({len(run.visible)}) in this node. If this is intentional and "
            "you are using:",
            "- ray, set '--distributed-executor-backend ray'.",
            "- multiprocessing, set '--nnodes' appropriately.",
        ],
    )


def replicas_do_not_fit(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    """Data-parallel replicas need more GPUs than CUDA_VISIBLE_DEVICES lists."""
    ws, dp = engine.world_size, engine.data_parallel_size
    base = ",".join(str(g) for g in run.visible)
    last = dp - 1
    for d in range(dp):
        if (d + 1) * ws > len(run.visible):
            last = d
            break
    return _traceback(
        run,
        [
            (
                "vllm/v1/engine/utils.py",
                126,
                "__init__",
                "with set_device_control_env_var(vllm_config, local_dp_rank):",
            ),
            ("vllm/v1/engine/utils.py", 186, "get_device_indices", "raise Exception("),
        ],
        [
            "Exception: Error setting CUDA_VISIBLE_DEVICES: local range: "
            f'[{last * ws}, {(last + 1) * ws}) base value: "{base}"',
        ],
    )


def port_out_of_range(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    return _traceback(run, [_BIND_FRAME], ["OverflowError: bind(): port must be 0-65535."])


def port_in_use(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    return _traceback(run, [_BIND_FRAME], ["OSError: [Errno 98] Address already in use"])


def quantization_mismatch(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    model = catalog.MODELS_BY_PATH.get(engine.model_path.rstrip("/"))
    method = model.quantization if model else "None"
    return _traceback(
        run,
        [
            _MODEL_CONFIG_FRAME,
            ("vllm/config/model.py", 1, "__post_init__", "self._verify_quantization()"),
        ],
        [
            f"ValueError: Quantization method specified in the model config ({method}) does "
            "not match the quantization method specified in the `quantization` argument "
            f"({engine.quantization}).",
        ],
    )


def missing_tokenizer(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    path = (engine.tokenizer or "").rstrip("/")
    return _traceback(
        run,
        [
            (
                "vllm/transformers_utils/tokenizer.py",
                269,
                "get_tokenizer",
                "tokenizer = AutoTokenizer.from_pretrained(",
            ),
        ],
        [
            f"OSError: Can't load tokenizer for '{path}'. If you were trying to load it from "
            "'https://huggingface.co/models', make sure you don't have a local directory "
            f"with the same name. Otherwise, make sure '{path}' is the correct path to a "
            "directory containing all relevant files for a PreTrainedTokenizerFast "
            "tokenizer.",
        ],
    )


def missing_model(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    return _traceback(
        run,
        [
            _MODEL_CONFIG_FRAME,
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
        ],
        _missing_model_error(engine.model_path),
    )


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
