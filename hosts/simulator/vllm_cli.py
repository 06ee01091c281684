"""How `vllm serve` reads its command line, as vLLM 0.11's FlexibleArgumentParser does.

The control plane's tests use this as "the engine": whatever list of extra arguments the control
plane accepts, this decides what would really serve. So the reading is argparse's own, not an
imitation of it: the simulator builds an argparse parser with the serve flags of vLLM 0.11 in
the order vLLM registers them, and argparse does the prefix abbreviations (`--tensor-parallel=2`,
an ambiguous `--max` as a usage error), `--flag=value` and `--flag value`, nargs, types, choices,
the last occurrence winning and the exact error messages. What vLLM's FlexibleArgumentParser
does before argparse sees the words is done here step by step in the same order:

1. the first `--model X` / `--model=X` is moved to the front as the positional model (0.11.1+
   keeps `--model` working with a deprecation warning), so a positional model *and* `--model`
   leaves a second positional: `vllm: error: unrecognized arguments: <the positional>`;
2. a `--config PATH` word pair (exactly that spelling: `--config=PATH` is not looked for and
   argparse stores it unread) splices the YAML file's flags in after the model, when the
   process starts (the file is read then, not at daemon-reload);
3. `_` becomes `-` in every `--flag_name` (only the name, up to a `.`), `-O3` becomes
   `-O.level=3`, `--help=x` becomes `--help`;
4. dotted `--group.key value` words are folded into one JSON argument per group.

Then `validate_parsed_serve_args` runs its cheap checks (a chat template that looks like a path
must exist; `--enable-auto-tool-choice` needs `--tool-call-parser`).

Python is 3.11 here and 3.12 on the real hosts; their argparse behaves the same for these cases.
Pure: no I/O, files come through `read_file`. `parse_vllm_argv` never raises.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import yaml

SERVE_PROG = "vllm serve"
SERVE_USAGE = "vllm serve [model_tag] [options]"
MAIN_PROG = "vllm"
MAIN_USAGE = "vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"  # ModelConfig.model's default in vLLM 0.11
REDACTED = "<redacted>"
SECRET_DESTS = frozenset({"api_key", "hf_token"})
WILDCARD_HOSTS = frozenset({None, "", "0.0.0.0", "::"})  # noqa: S104 - what a bind means


@dataclass(frozen=True)
class CliFailure:
    """An exception vLLM's command line handling raises before the API server starts."""

    where: str  # the function that raised: parse_args, load_config_file, validate_..., ...
    code: str  # the line that raised, as the traceback quotes it
    exception: str  # the traceback's last line(s), e.g. "ValueError: ..."
    logged: str = ""  # what vLLM logged at ERROR just before raising, if anything


@dataclass(frozen=True)
class EngineArgs:
    """What `vllm serve` makes of its command line (the flags that change behaviour)."""

    binary: str
    model_path: str
    served_name: str  # the first --served-model-name (metrics label), or the model
    served_names: tuple[str, ...] = ()  # every name /v1/models lists and requests may use
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    port: int = 8000
    host: str | None = None  # None: all interfaces
    uds: str | None = None  # a unix socket instead of TCP
    headless: bool = False  # engines only, no API server (--headless, --api-server-count 0)
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    quantization: str | None = None
    trust_remote_code: bool = False
    api_key_set: bool = False
    # sha256 of each --api-key: enough to check a request's bearer token, and never the key.
    api_key_sha256: tuple[str, ...] = ()
    tokenizer: str | None = None
    load_format: str = "auto"
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    enforce_eager: bool = False
    enable_prefix_caching: bool | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    chat_template: str | None = None
    config_file: str | None = None  # `--config PATH`: read when the process starts
    non_default: tuple[tuple[str, object], ...] = ()  # the journal's "non-default args"
    warnings: tuple[str, ...] = ()  # what the parser logged at WARNING
    usage_error: str | None = None  # argparse's message (exit status 2)
    usage_prog: str = SERVE_PROG  # whose usage error: "vllm serve", or "vllm" (unrecognized)
    cli_failure: CliFailure | None = None  # an exception before the server starts (status 1)
    help_requested: bool = False  # --help: prints the help and exits 0

    @property
    def world_size(self) -> int:
        """GPUs of one data-parallel replica."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def gpus_needed(self) -> int:
        return self.world_size * self.data_parallel_size

    @property
    def exit_status(self) -> int | None:
        """How the process ends before it serves anything (None: it goes on to load)."""
        if self.help_requested:
            return 0
        if self.usage_error is not None:
            return 2
        if self.cli_failure is not None:
            return 1
        return None

    @property
    def reads_files(self) -> bool:
        """Whether starting the process reads files whose presence decides the outcome."""
        return self.config_file is not None or self.chat_template is not None

    def serves_http_at(self, url_host: str) -> bool:
        """Whether `curl http://URL_HOST:PORT/` on the host itself reaches this server."""
        if self.headless or self.uds is not None:
            return False
        bound = _bound_families(self.host)
        wanted = {
            "127.0.0.1": {"v4"},
            "0.0.0.0": {"v4"},  # noqa: S104 - connecting to it means loopback
            "localhost": {"v6", "v4"},  # curl tries ::1, then 127.0.0.1
            "::1": {"v6"},
            "[::1]": {"v6"},
        }.get(url_host)
        if wanted is None:  # one of the host's own addresses: only an exact bind answers
            return self.host is not None and self.host == url_host.strip("[]")
        return bool(wanted & bound)

    def binds_clash(self, other: EngineArgs) -> bool:
        """Two servers that cannot both listen (EADDRINUSE for the second)."""
        if self.headless or other.headless or self.uds is not None or other.uds is not None:
            return False
        if self.port != other.port:
            return False
        if self.host in WILDCARD_HOSTS or other.host in WILDCARD_HOSTS:
            return True
        return _normal_host(self.host) == _normal_host(other.host)


def _bound_families(host: str | None) -> set[str]:
    if host in (None, "", "0.0.0.0", "127.0.0.1", "localhost"):  # noqa: S104
        return {"v4"}
    if host == "::":
        return {"v4", "v6"}  # dual-stack by default (net.ipv6.bindv6only=0)
    if host == "::1":
        return {"v6"}
    return set()  # another address: not reachable on loopback


def _normal_host(host: str | None) -> str | None:
    return "127.0.0.1" if host == "localhost" else host


# --- argparse types, named as vLLM names them (argparse prints the name) -------------------


def human_readable_int(value: str) -> int:
    """vLLM's type for --max-model-len and token counts: `32k`, `1M` or a plain number."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        decimal = {"k": 10**3, "m": 10**6, "g": 10**9}
        binary = {"K": 2**10, "M": 2**20, "G": 2**30}
        number, suffix = match.groups()
        if suffix in decimal:
            return int(float(number) * decimal[suffix])
        if suffix in binary:
            try:
                return int(number) * binary[suffix]
            except ValueError as exc:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with binary suffixes like {suffix}. "
                    f"Did you mean to use {number}{suffix.lower()} instead?"
                ) from exc
    return int(value)


def optional_type(return_type: Callable[[str], Any]) -> Callable[[str], Any]:
    def _optional_type(val: str) -> Any:
        if val == "" or val == "None":
            return None
        return return_type(val)

    return _optional_type


class _Loads:
    """json.loads, printed as vLLM's error messages print it."""

    __name__ = "loads"

    def __call__(self, val: str) -> Any:
        return json.loads(val)

    def __repr__(self) -> str:
        return "<function loads at 0x7f3a9c2b5e40>"


_LOADS = _Loads()


def parse_type(return_type: Callable[[str], Any]) -> Callable[[str], Any]:
    def _parse_type(val: str) -> Any:
        try:
            return return_type(val)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(
                f"Value {val} cannot be converted to {return_type}."
            ) from exc

    return _parse_type


def _dataclass_type(cls_name: str) -> Callable[[str], Any]:
    def parse_dataclass(val: str) -> Any:
        try:
            return json.loads(val)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(
                f"1 validation error for {cls_name}\n  Invalid JSON: expected value at line 1 "
                f"column 1 [type=json_invalid, input_value={val!r}, input_type=str]"
            ) from exc

    return parse_dataclass


# --- the flag table ------------------------------------------------------------------------
#
# `vllm serve`'s options in vLLM 0.11.x, in registration order (which is the order argparse
# lists them in "ambiguous option: --x could match ..." and the order of "non-default args"):
# make_arg_parser (vllm/entrypoints/openai/cli_args.py: model_tag, --headless,
# --api-server-count, --config), FrontendArgs, then EngineArgs.add_cli_args group by group
# (ModelConfig, LoadConfig, StructuredOutputsConfig, ParallelConfig, CacheConfig,
# MultiModalConfig, LoRAConfig, ObservabilityConfig, SchedulerConfig, VllmConfig), then
# --disable-log-stats and AsyncEngineArgs. Reconstructed from vLLM 0.11's sources and
# `vllm serve --help=all`; the kinds follow vLLM's get_kwargs(): a bool field becomes
# argparse.BooleanOptionalAction (so `--no-x` exists too), Optional[X] is wrapped in
# optional_type (so "None" and "" mean None), list[X] takes nargs="+", a Literal gives sorted
# choices. Every long flag is listed, including ones the simulator ignores, so that prefix
# abbreviations resolve (or clash) exactly as they would.
#
# kind: str ostr int oint hint ohint float ofloat bool true json loads olist ilist token
#       choice ochoice ichoice (choices in `choices`), config:<Class> (a dataclass as JSON)


@dataclass(frozen=True)
class _Flag:
    names: tuple[str, ...]
    kind: str
    default: Any = None
    choices: tuple[Any, ...] = ()


def _f(*names: str, kind: str = "ostr", default: Any = None, choices: Sequence[Any] = ()) -> _Flag:
    return _Flag(tuple(names), kind, default, tuple(choices))


_QUANTIZATION_METHODS = (
    "awq",
    "deepseek_fp8",
    "tpu_int8",
    "fp8",
    "ptpc_fp8",
    "fbgemm_fp8",
    "fp_quant",
    "modelopt",
    "modelopt_fp4",
    "bitblas",
    "gguf",
    "gptq_marlin_24",
    "gptq_marlin",
    "gptq_bitblas",
    "awq_marlin",
    "gptq",
    "compressed-tensors",
    "bitsandbytes",
    "hqq",
    "experts_int8",
    "ipex",
    "quark",
    "moe_wna16",
    "torchao",
    "auto-round",
    "rtn",
    "inc",
    "mxfp4",
    "petit_nvfp4",
)

_FLAGS: tuple[_Flag, ...] = (
    # make_arg_parser
    _f("--headless", kind="true", default=False),
    _f("--api-server-count", "-asc", kind="int", default=1),
    _f("--config", kind="ostr"),
    # FrontendArgs
    _f("--host"),
    _f("--port", kind="int", default=8000),
    _f("--uds"),
    _f(
        "--uvicorn-log-level",
        kind="choice",
        default="info",
        choices=("critical", "debug", "error", "info", "trace", "warning"),
    ),
    _f("--disable-uvicorn-access-log", kind="bool", default=False),
    _f("--allow-credentials", kind="bool", default=False),
    _f("--allowed-origins", kind="loads", default=["*"]),
    _f("--allowed-methods", kind="loads", default=["*"]),
    _f("--allowed-headers", kind="loads", default=["*"]),
    _f("--api-key", kind="olist"),
    _f("--lora-modules", kind="olist"),
    _f("--chat-template"),
    _f(
        "--chat-template-content-format",
        kind="choice",
        default="auto",
        choices=("auto", "openai", "string"),
    ),
    _f("--trust-request-chat-template", kind="bool", default=False),
    _f("--response-role", kind="str", default="assistant"),
    _f("--ssl-keyfile"),
    _f("--ssl-certfile"),
    _f("--ssl-ca-certs"),
    _f("--enable-ssl-refresh", kind="bool", default=False),
    _f("--ssl-cert-reqs", kind="int", default=0),
    _f("--root-path"),
    _f("--middleware", kind="append", default=[]),
    _f("--return-tokens-as-token-ids", kind="bool", default=False),
    _f("--disable-frontend-multiprocessing", kind="bool", default=False),
    _f("--enable-request-id-headers", kind="bool", default=False),
    _f("--enable-auto-tool-choice", kind="bool", default=False),
    _f("--exclude-tools-when-tool-choice-none", kind="bool", default=False),
    _f("--tool-call-parser"),
    _f("--tool-parser-plugin", kind="str", default=""),
    _f("--tool-server"),
    _f("--log-config-file"),
    _f("--max-log-len", kind="oint"),
    _f("--disable-fastapi-docs", kind="bool", default=False),
    _f("--enable-prompt-tokens-details", kind="bool", default=False),
    _f("--enable-server-load-tracking", kind="bool", default=False),
    _f("--enable-force-include-usage", kind="bool", default=False),
    _f("--enable-tokenizer-info-endpoint", kind="bool", default=False),
    _f("--enable-log-outputs", kind="bool", default=False),
    _f("--h11-max-incomplete-event-size", kind="int", default=4194304),
    _f("--h11-max-header-count", kind="int", default=256),
    _f("--log-error-stack", kind="bool", default=False),
    # ModelConfig
    _f("--model", kind="str", default=DEFAULT_MODEL),
    _f("--runner", kind="choice", default="auto", choices=("auto", "draft", "generate", "pooling")),
    _f(
        "--convert",
        kind="choice",
        default="auto",
        choices=("auto", "classify", "embed", "none", "reward"),
    ),
    _f(
        "--task",
        kind="ochoice",
        choices=(
            "classify",
            "draft",
            "embed",
            "embedding",
            "generate",
            "reward",
            "score",
            "transcription",
        ),
    ),
    _f("--tokenizer"),
    _f(
        "--tokenizer-mode",
        kind="choice",
        default="auto",
        choices=("auto", "custom", "mistral", "slow"),
    ),
    _f("--trust-remote-code", kind="bool", default=False),
    _f(
        "--dtype",
        kind="choice",
        default="auto",
        choices=("auto", "bfloat16", "float", "float16", "float32", "half"),
    ),
    _f("--seed", kind="oint"),
    _f("--hf-config-path"),
    _f("--allowed-local-media-path", kind="str", default=""),
    _f("--allowed-media-domains", kind="olist"),
    _f("--revision"),
    _f("--code-revision"),
    _f("--rope-scaling", kind="json", default={}),
    _f("--rope-theta", kind="ofloat"),
    _f("--tokenizer-revision"),
    _f("--max-model-len", kind="hint"),
    _f("--quantization", "-q", kind="ochoice", choices=_QUANTIZATION_METHODS),
    _f("--enforce-eager", kind="bool", default=False),
    _f("--max-logprobs", kind="int", default=20),
    _f(
        "--logprobs-mode",
        kind="choice",
        default="raw_logprobs",
        choices=("processed_logits", "processed_logprobs", "raw_logits", "raw_logprobs"),
    ),
    _f("--disable-sliding-window", kind="bool", default=False),
    _f("--disable-cascade-attn", kind="bool", default=False),
    _f("--skip-tokenizer-init", kind="bool", default=False),
    _f("--enable-prompt-embeds", kind="bool", default=False),
    _f("--served-model-name", kind="olist"),
    _f("--config-format", kind="choice", default="auto", choices=("auto", "hf", "mistral")),
    _f("--hf-token", kind="token"),
    _f("--hf-overrides", kind="json", default={}),
    _f("--pooler-config", kind="config:PoolerConfig"),
    _f("--override-pooler-config", kind="config:PoolerConfig"),
    _f("--logits-processor-pattern"),
    _f("--generation-config", kind="str", default="auto"),
    _f("--override-generation-config", kind="json", default={}),
    _f("--enable-sleep-mode", kind="bool", default=False),
    _f(
        "--model-impl",
        kind="choice",
        default="auto",
        choices=("auto", "terratorch", "transformers", "vllm"),
    ),
    _f("--override-attention-dtype"),
    _f("--logits-processors", kind="olist"),
    _f("--io-processor-plugin"),
    # LoadConfig
    _f("--load-format", kind="str", default="auto"),
    _f("--download-dir"),
    _f("--safetensors-load-strategy", kind="str", default="lazy"),
    _f("--model-loader-extra-config", kind="json", default={}),
    _f("--ignore-patterns", kind="olist"),
    _f("--use-tqdm-on-load", kind="bool", default=True),
    _f("--pt-load-map-location", kind="str", default="cpu"),
    # StructuredOutputsConfig
    _f("--reasoning-parser", kind="str", default=""),
    # ParallelConfig
    _f(
        "--distributed-executor-backend",
        kind="ochoice",
        choices=("external_launcher", "mp", "ray", "uni"),
    ),
    _f("--pipeline-parallel-size", "-pp", kind="int", default=1),
    _f("--tensor-parallel-size", "-tp", kind="int", default=1),
    _f("--decode-context-parallel-size", "-dcp", kind="int", default=1),
    _f("--data-parallel-size", "-dp", kind="int", default=1),
    _f("--data-parallel-rank", "-dpn", kind="oint"),
    _f("--data-parallel-start-rank", "-dpr", kind="oint"),
    _f("--data-parallel-size-local", "-dpl", kind="oint"),
    _f("--data-parallel-address", "-dpa"),
    _f("--data-parallel-rpc-port", "-dpp", kind="oint"),
    _f("--data-parallel-backend", "-dpb", kind="str", default="mp"),
    _f("--data-parallel-hybrid-lb", kind="bool", default=False),
    _f("--enable-expert-parallel", kind="bool", default=False),
    _f("--enable-dbo", kind="bool", default=False),
    _f("--dbo-decode-token-threshold", kind="int", default=32),
    _f("--dbo-prefill-token-threshold", kind="int", default=512),
    _f("--enable-eplb", kind="bool", default=False),
    _f("--eplb-config", kind="config:EPLBConfig"),
    # Deprecated in 0.11 in favour of --eplb-config, still accepted until 0.12.
    _f("--num-redundant-experts", kind="oint"),
    _f("--eplb-window-size", kind="oint"),
    _f("--eplb-step-interval", kind="oint"),
    _f("--eplb-log-balancedness", kind="bool"),
    _f(
        "--expert-placement-strategy",
        kind="choice",
        default="linear",
        choices=("linear", "round_robin"),
    ),
    _f("--max-parallel-loading-workers", kind="oint"),
    _f("--ray-workers-use-nsight", kind="bool", default=False),
    _f("--disable-custom-all-reduce", kind="bool", default=False),
    _f("--worker-cls", kind="str", default="auto"),
    _f("--worker-extension-cls", kind="str", default=""),
    _f("--enable-multimodal-encoder-data-parallel", kind="bool", default=False),
    # CacheConfig
    _f("--block-size", kind="ichoice", choices=(1, 8, 16, 32, 64, 128)),
    _f("--gpu-memory-utilization", kind="float", default=0.9),
    _f("--kv-cache-memory", kind="ohint"),
    _f("--swap-space", kind="float", default=4),
    _f(
        "--kv-cache-dtype",
        kind="choice",
        default="auto",
        choices=("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"),
    ),
    _f("--num-gpu-blocks-override", kind="oint"),
    _f("--enable-prefix-caching", kind="bool"),
    _f(
        "--prefix-caching-hash-algo",
        kind="choice",
        default="sha256",
        choices=("sha256", "sha256_cbor"),
    ),
    _f("--cpu-offload-gb", kind="float", default=0),
    _f("--calculate-kv-scales", kind="bool", default=False),
    _f("--kv-sharing-fast-prefill", kind="bool", default=False),
    _f("--mamba-cache-dtype", kind="choice", default="auto", choices=("auto", "float32")),
    _f("--mamba-ssm-cache-dtype", kind="choice", default="auto", choices=("auto", "float32")),
    # MultiModalConfig
    _f("--limit-mm-per-prompt", kind="json", default={}),
    _f("--media-io-kwargs", kind="json", default={}),
    _f("--mm-processor-kwargs", kind="json"),
    _f("--mm-processor-cache-gb", kind="float", default=4),
    _f("--disable-mm-preprocessor-cache", kind="bool", default=False),
    _f("--mm-processor-cache-type", kind="choice", default="lru", choices=("lru", "shm")),
    _f("--mm-shm-cache-max-object-size-mb", kind="int", default=128),
    _f("--mm-encoder-tp-mode", kind="choice", default="weights", choices=("data", "weights")),
    _f("--interleave-mm-strings", kind="bool", default=False),
    _f("--skip-mm-profiling", kind="bool", default=False),
    _f("--video-pruning-rate", kind="ofloat"),
    # LoRAConfig
    _f("--enable-lora", kind="bool", default=False),
    _f("--enable-lora-bias", kind="bool", default=False),
    _f("--max-loras", kind="int", default=1),
    _f("--max-lora-rank", kind="int", default=16),
    _f("--lora-extra-vocab-size", kind="int", default=256),
    _f("--lora-dtype", kind="str", default="auto"),
    _f("--max-cpu-loras", kind="oint"),
    _f("--fully-sharded-loras", kind="bool", default=False),
    _f("--default-mm-loras", kind="json"),
    # ObservabilityConfig
    _f("--show-hidden-metrics-for-version"),
    _f("--otlp-traces-endpoint"),
    _f("--collect-detailed-traces", kind="olist"),
    # SchedulerConfig
    _f("--max-num-batched-tokens", kind="ohint"),
    _f("--max-num-seqs", kind="oint"),
    _f("--max-num-partial-prefills", kind="int", default=1),
    _f("--max-long-partial-prefills", kind="int", default=1),
    _f("--cuda-graph-sizes", kind="ilist"),
    _f("--long-prefill-token-threshold", kind="int", default=0),
    _f("--num-lookahead-slots", kind="int", default=0),
    _f("--scheduling-policy", kind="choice", default="fcfs", choices=("fcfs", "priority")),
    _f("--enable-chunked-prefill", kind="bool"),
    _f("--disable-chunked-mm-input", kind="bool", default=False),
    _f("--scheduler-cls", kind="str", default="vllm.core.scheduler.Scheduler"),
    _f("--disable-hybrid-kv-cache-manager", kind="bool", default=False),
    _f("--async-scheduling", kind="bool", default=False),
    # VllmConfig
    _f("--speculative-config", kind="json"),
    _f("--kv-transfer-config", kind="config:KVTransferConfig"),
    _f("--kv-events-config", kind="config:KVEventsConfig"),
    _f("--compilation-config", "-O", kind="config:CompilationConfig"),
    _f("--additional-config", kind="json", default={}),
    _f("--structured-outputs-config", kind="config:StructuredOutputsConfig"),
    # EngineArgs, AsyncEngineArgs
    _f("--disable-log-stats", kind="true", default=False),
    _f("--enable-log-requests", kind="bool", default=False),
    _f("--disable-log-requests", kind="bool", default=True),
)

LONG_FLAGS: tuple[str, ...] = tuple(
    name for flag in _FLAGS for name in flag.names if name.startswith("--")
)


# --- the parser ----------------------------------------------------------------------------


class _UsageError(Exception):
    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message


class _HelpExit(Exception):
    """--help: argparse prints the help and exits 0."""


class _Parser(argparse.ArgumentParser):
    """argparse, minus the printing and exiting: errors come back as exceptions."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(self.prog, message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _HelpExit()

    def _print_message(self, message: str, file: Any = None) -> None:
        return None


class _HelpAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS)

    def __call__(
        self, parser: Any, namespace: Any, values: Any, option_string: str | None = None
    ) -> None:
        raise _HelpExit()


def _add(parser: argparse.ArgumentParser, flag: _Flag) -> None:
    kind = flag.kind
    kw: dict[str, Any] = {"default": flag.default}
    if kind == "str":
        kw["type"] = str
    elif kind == "ostr":
        kw["type"] = optional_type(str)
    elif kind == "int":
        kw["type"] = int
    elif kind == "oint":
        kw["type"] = optional_type(int)
    elif kind == "hint":
        kw["type"] = human_readable_int
    elif kind == "ohint":
        kw["type"] = optional_type(human_readable_int)
    elif kind == "float":
        kw["type"] = float
    elif kind == "ofloat":
        kw["type"] = optional_type(float)
    elif kind == "bool":
        kw["action"] = argparse.BooleanOptionalAction
    elif kind == "true":
        kw["action"] = "store_true"
    elif kind == "json":
        kw["type"] = parse_type(_LOADS)
    elif kind == "loads":
        kw["type"] = _LOADS
    elif kind == "olist":
        kw["type"] = optional_type(str)
        kw["nargs"] = "+"
    elif kind == "ilist":
        kw["type"] = int
        kw["nargs"] = "+"
    elif kind == "append":
        kw["type"] = str
        kw["action"] = "append"
    elif kind == "token":
        kw["type"] = str
        kw["nargs"] = "?"
        kw["const"] = True
    elif kind == "choice":
        kw["type"] = str
        kw["choices"] = list(flag.choices)
    elif kind == "ochoice":
        kw["type"] = optional_type(str)
        kw["choices"] = [*sorted(flag.choices), "None"]
    elif kind == "ichoice":
        kw["type"] = int
        kw["choices"] = list(flag.choices)
    elif kind.startswith("config:"):
        kw["type"] = _dataclass_type(kind.split(":", 1)[1])
    else:  # pragma: no cover - a typo in the table
        raise AssertionError(f"unknown flag kind {kind!r}")
    parser.add_argument(*flag.names, **kw)


@functools.cache
def _parsers() -> tuple[_Parser, _Parser]:
    """The `vllm` parser and its `serve` subparser, built once (parsing does not change them)."""
    main = _Parser(prog=MAIN_PROG, add_help=False)
    main.add_argument("-h", "--help", action=_HelpAction)
    main.add_argument("-v", "--version", action=_HelpAction)  # prints the version, exits 0
    sub = main.add_subparsers(dest="subparser", required=False, parser_class=_Parser)
    serve = sub.add_parser("serve", usage=SERVE_USAGE, add_help=False)
    serve.add_argument("-h", "--help", action=_HelpAction)
    serve.add_argument("model_tag", type=str, nargs="?")
    for flag in _FLAGS:
        _add(serve, flag)
    return main, serve


@functools.cache
def _defaults() -> tuple[tuple[str, Any], ...]:
    """Each destination's default, in registration order (vLLM's non-default args order)."""
    _main, serve = _parsers()
    return tuple(vars(serve.parse_args([])).items())


# --- FlexibleArgumentParser's steps --------------------------------------------------------

_UNDERSCORES = re.compile(r"(?<=--)[^\.]*")  # everything between the first -- and the first .


def _dashes(match: re.Match[str]) -> str:
    return match.group(0).replace("_", "-")


class _Crash(Exception):
    """What FlexibleArgumentParser.parse_args raises itself (vLLM prints a traceback)."""

    def __init__(self, failure: CliFailure) -> None:
        super().__init__(failure.exception)
        self.failure = failure


def _config_args(path: str, read_file: Callable[[str], str | None]) -> list[str]:
    """FlexibleArgumentParser.load_config_file: a flat YAML mapping as flags."""
    extension = path.split(".")[-1]
    if extension not in ("yaml", "yml"):
        raise _Crash(
            CliFailure(
                "load_config_file",
                "raise ValueError(",
                f"ValueError: Config file must be of a yaml/yml type. {extension} supplied",
            )
        )
    logged = f"Unable to read the config file at {path}. Check path correctness"
    full = path if path.startswith("/") else "/" + path  # systemd starts units in /
    text = read_file(posixpath.normpath(full))
    if text is None:
        raise _Crash(
            CliFailure(
                "load_config_file",
                "with open(file_path) as config_file:",
                f"FileNotFoundError: [Errno 2] No such file or directory: {path!r}",
                logged,
            )
        )
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        name = f"{type(exc).__module__}.{type(exc).__name__}"
        code = "config = yaml.safe_load(config_file)"
        raise _Crash(CliFailure("load_config_file", code, f"{name}: {exc}", logged)) from exc
    if not isinstance(config, dict):
        raise _Crash(
            CliFailure(
                "load_config_file",
                "for key, value in config.items():",
                f"AttributeError: '{type(config).__name__}' object has no attribute 'items'",
            )
        )
    args: list[str] = []
    for key, value in config.items():
        if isinstance(value, bool):
            if value:
                args.append(f"--{key}")
        elif isinstance(value, list):
            if value:
                args.append(f"--{key}")
                args.extend(str(item) for item in value)
        else:
            args += [f"--{key}", str(value)]
    return args


def _nested(keys: list[str], value: Any) -> Any:
    for key in reversed(keys):
        value = {key: value}
    return value


def _merge(original: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(original.get(key), dict):
            _merge(original[key], value)
        elif isinstance(value, list) and isinstance(original.get(key), list):
            original[key] += value
        else:
            original[key] = value


def _flexible(
    args: list[str], read_file: Callable[[str], str | None] | None
) -> tuple[list[str], str | None, tuple[str, ...]]:
    """FlexibleArgumentParser.parse_args up to handing the words to argparse.

    Returns the words argparse sees, the `--config` path (if any) and the warnings logged.
    """
    warnings: list[str] = []
    model_idx = next(
        (i for i, a in enumerate(args) if a == "--model" or a.startswith("--model=")), None
    )
    if model_idx is not None:
        warnings.append(
            "With `vllm serve`, you should provide the model as a positional argument or in a "
            "config file instead of via the `--model` option. The `--model` option will be "
            "removed in v0.13."
        )
        if args[model_idx] == "--model":
            if model_idx + 1 >= len(args):
                raise _Crash(
                    CliFailure(
                        "parse_args",
                        "model_tag = args[model_idx + 1]",
                        "IndexError: list index out of range",
                    )
                )
            model_tag, rest = args[model_idx + 1], model_idx + 2
        else:
            model_tag, rest = args[model_idx].removeprefix("--model="), model_idx + 1
        args = ["serve", model_tag, *args[1:model_idx], *args[rest:]]

    config_file = None
    if "--config" in args:
        if args.count("--config") > 1:
            raise _Crash(
                CliFailure(
                    "_pull_args_from_config",
                    'assert args.count("--config") <= 1, "More than one config file specified!"',
                    "AssertionError: More than one config file specified!",
                )
            )
        index = args.index("--config")
        if index == len(args) - 1:
            raise _Crash(
                CliFailure(
                    "_pull_args_from_config",
                    "raise ValueError(",
                    "ValueError: No config file specified! "
                    + " " * 29
                    + "Please check your command-line arguments.",
                )
            )
        config_file = args[index + 1]
        if read_file is not None:
            config_args = _config_args(config_file, read_file)
            model_in_cli = len(args) > 1 and not args[1].startswith("-")
            if not model_in_cli and "--model" not in config_args:
                raise _Crash(
                    CliFailure(
                        "_pull_args_from_config",
                        "raise ValueError(",
                        "ValueError: No model specified! Please specify model either as a "
                        "positional argument or in a config file.",
                    )
                )
            if model_in_cli:
                args = [args[0], args[1], *config_args, *args[2:index], *args[index + 2 :]]
            else:
                args = [args[0], *config_args, *args[1:index], *args[index + 2 :]]

    processed: list[str] = []
    for arg in args:
        if arg.startswith("--help="):
            processed.append("--help")
        elif arg.startswith("--"):
            if "=" in arg:
                key, value = arg.split("=", 1)
                processed.append(f"{_UNDERSCORES.sub(_dashes, key, count=1)}={value}")
            else:
                processed.append(_UNDERSCORES.sub(_dashes, arg, count=1))
        elif arg.startswith("-O") and arg != "-O" and arg[2] != ".":
            level = arg[3:] if arg[2] == "=" else arg[2:]
            processed.append(f"-O.level={level}")
        else:
            processed.append(arg)

    # Dotted arguments (--compilation-config.level 3) become one JSON argument per group.
    delete: set[int] = set()
    dict_args: dict[str, dict[str, Any]] = {}
    for i, arg in enumerate(processed):
        if i in delete or (arg.startswith("--") and "." not in arg):
            continue
        if arg.startswith("-") and "." in arg:
            if "=" in arg:
                arg, value_str = arg.split("=", 1)
                if "." not in arg:
                    continue  # the dot was in the value
            else:
                if i + 1 >= len(processed):
                    raise _Crash(
                        CliFailure(
                            "parse_args",
                            "value_str = processed_args[i + 1]",
                            "IndexError: list index out of range",
                        )
                    )
                value_str = processed[i + 1]
                delete.add(i + 1)
            if arg.endswith("+"):
                arg = arg[:-1]
                value_str = json.dumps(value_str.split(","))
            key, *keys = arg.split(".")
            try:
                parsed: Any = json.loads(value_str)
            except ValueError:
                parsed = value_str
            nested = _nested(keys, parsed)
            target = dict_args.setdefault(key, {})
            if isinstance(nested, dict):
                _merge(target, nested)
            delete.add(i)
    processed = [a for i, a in enumerate(processed) if i not in delete]
    for key, group in dict_args.items():
        processed += [key, json.dumps(group)]
    return processed, config_file, tuple(warnings)


def _validate(ns: argparse.Namespace, read_file: Callable[[str], str | None] | None) -> None:
    """validate_parsed_serve_args: what `vllm serve` checks before it starts anything."""
    template = ns.chat_template
    if template is not None and read_file is not None and not any(c in template for c in "{}\n"):
        path = posixpath.normpath(template if template.startswith("/") else "/" + template)
        if read_file(path) is None:
            raise _Crash(
                CliFailure(
                    "validate_chat_template",
                    "raise ValueError(",
                    f"ValueError: The supplied chat template string ({template}) appears "
                    "path-like, but doesn't exist!",
                )
            )
    if ns.enable_auto_tool_choice and not ns.tool_call_parser:
        raise _Crash(
            CliFailure(
                "validate_parsed_serve_args",
                "raise TypeError(",
                "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser",
            )
        )
    if ns.enable_log_outputs and not ns.enable_log_requests:
        raise _Crash(
            CliFailure(
                "validate_parsed_serve_args",
                "raise TypeError(",
                "TypeError: Error: --enable-log-outputs requires --enable-log-requests",
            )
        )


def _engine(binary: str, ns: argparse.Namespace, **extra: Any) -> EngineArgs:
    model = str(ns.model_tag if ns.model_tag is not None else ns.model)
    ns.model = model  # ServeSubcommand.cmd: the positional model wins
    names = tuple(str(n) for n in ns.served_model_name or () if n is not None) or (model,)
    non_default: list[tuple[str, object]] = []
    for dest, default in _defaults():
        value = getattr(ns, dest, default)
        if value != default:
            if dest in SECRET_DESTS and value not in (None, True):
                value = [REDACTED] * len(value) if isinstance(value, list) else REDACTED
            non_default.append((dest, value))
    keys = tuple(k for k in (ns.api_key or ()) if k is not None)
    return EngineArgs(
        binary=binary,
        model_path=model,
        served_name=names[0],
        served_names=names,
        tensor_parallel_size=ns.tensor_parallel_size,
        pipeline_parallel_size=ns.pipeline_parallel_size,
        data_parallel_size=ns.data_parallel_size,
        port=ns.port,
        host=ns.host,
        uds=ns.uds,
        headless=bool(ns.headless) or ns.api_server_count < 1,
        max_model_len=ns.max_model_len,
        gpu_memory_utilization=ns.gpu_memory_utilization,
        quantization=ns.quantization,
        trust_remote_code=bool(ns.trust_remote_code),
        api_key_set=bool(keys),
        api_key_sha256=tuple(hashlib.sha256(k.encode()).hexdigest() for k in keys),
        tokenizer=ns.tokenizer,
        load_format=ns.load_format,
        dtype=ns.dtype,
        kv_cache_dtype=ns.kv_cache_dtype,
        enforce_eager=bool(ns.enforce_eager),
        enable_prefix_caching=ns.enable_prefix_caching,
        max_num_seqs=ns.max_num_seqs,
        max_num_batched_tokens=ns.max_num_batched_tokens,
        chat_template=ns.chat_template,
        non_default=tuple(non_default),
        **extra,
    )


def _parse(argv: tuple[str, ...], read_file: Callable[[str], str | None] | None) -> EngineArgs:
    binary = argv[0]
    failed = EngineArgs(binary=binary, model_path="", served_name="")
    try:
        processed, config_file, warnings = _flexible(["serve", *argv[2:]], read_file)
    except _Crash as exc:
        return dataclasses.replace(failed, cli_failure=exc.failure)
    except Exception as exc:  # vLLM would print a traceback too; never crash the simulator
        return dataclasses.replace(failed, cli_failure=_unexpected(exc))
    failed = dataclasses.replace(failed, config_file=config_file, warnings=warnings)
    try:
        main, _serve = _parsers()
        ns = main.parse_args(processed)
        _validate(ns, read_file)
        return _engine(binary, ns, config_file=config_file, warnings=warnings)
    except _UsageError as exc:
        return dataclasses.replace(failed, usage_error=exc.message, usage_prog=exc.prog)
    except _HelpExit:
        return dataclasses.replace(failed, help_requested=True)
    except _Crash as exc:
        return dataclasses.replace(failed, cli_failure=exc.failure)
    except Exception as exc:
        return dataclasses.replace(failed, cli_failure=_unexpected(exc))


def _unexpected(exc: Exception) -> CliFailure:
    return CliFailure(
        "parse_args",
        "return super().parse_args(processed_args, namespace)",
        f"{type(exc).__name__}: {exc}",
    )


@functools.lru_cache(maxsize=512)
def _parse_cached(argv: tuple[str, ...]) -> EngineArgs:
    return _parse(argv, None)


def is_vllm_serve(argv: Sequence[str]) -> bool:
    return len(argv) >= 2 and argv[0].rsplit("/", 1)[-1] == "vllm" and argv[1] == "serve"


def parse_vllm_argv(
    argv: tuple[str, ...], read_file: Callable[[str], str | None] | None = None
) -> EngineArgs | None:
    """`vllm serve ...` as vLLM reads it; None when the command is not a vLLM server.

    Without `read_file` (how systemd loads a unit) files are not read: a `--config PATH` is
    only noted, and a chat template path is not checked. With it (how the process starts) the
    config file's flags are spliced in and missing files fail the way vLLM fails. Never raises:
    a bad command line gives an EngineArgs with usage_error, cli_failure or help_requested set.
    """
    argv = tuple(str(a) for a in argv)
    if not is_vllm_serve(argv):
        return None
    if read_file is None:
        return _parse_cached(argv)
    return _parse(argv, read_file)


# --- the processes a server runs, as vLLM 0.11 names them -------------------------------------


def worker_title(engine: EngineArgs, rank: int) -> str:
    """A GPU worker's name (its log prefix, and its process title after "VLLM::").

    `rank` counts across data-parallel replicas. With one GPU per replica there is no worker
    process: the EngineCore runs the model itself.
    """
    if engine.world_size == 1:
        return core_title(rank)
    dp_rank, local = divmod(rank, engine.world_size)
    pp_rank, tp_rank = divmod(local, engine.tensor_parallel_size)
    title = "Worker"
    if engine.data_parallel_size > 1:
        title += f"_DP{dp_rank}"
    if engine.pipeline_parallel_size > 1:
        title += f"_PP{pp_rank}"
    if engine.tensor_parallel_size > 1:
        title += f"_TP{tp_rank}"
    return title


def core_title(dp_rank: int) -> str:
    return f"EngineCore_DP{dp_rank}"


def worker_pid(engine: EngineArgs, main_pid: int, rank: int) -> int:
    """Workers follow the API server (rank 0 shares its PID: the simulator's convention)."""
    if engine.world_size == 1:
        return core_pid(engine, main_pid, rank)
    return main_pid + rank


def core_pid(engine: EngineArgs, main_pid: int, dp_rank: int) -> int:
    return main_pid + engine.gpus_needed + dp_rank


def help_lines() -> list[str]:
    """The start of what `vllm serve --help` prints (the journal shows it as the unit's output)."""
    return [
        f"usage: {SERVE_USAGE}",
        "",
        "Launch a local OpenAI-compatible API server to serve LLM",
        f"completions via HTTP. Defaults to {DEFAULT_MODEL} if no model is specified.",
        "",
        "Search by using: `--help=<ConfigGroup>` to explore options by section (e.g.,",
        "--help=ModelConfig, --help=Frontend)",
        "  Use `--help=all` to show all available flags at once.",
        "",
        "Config Groups:",
        "  positional arguments",
        "  options",
        "  Frontend                Arguments for the OpenAI-compatible frontend server.",
        "  ModelConfig             Configuration for the model.",
        "  LoadConfig              Configuration for loading the model weights.",
        "  ParallelConfig          Configuration for the distributed execution.",
        "  CacheConfig             Configuration for the KV cache.",
        "  SchedulerConfig         Scheduler configuration.",
        "  VllmConfig              Dataclass which contains all vllm-related configuration.",
        "",
        "For full list:            vllm serve --help=all",
        "For a section:            vllm serve --help=ModelConfig    (case-insensitive)",
        "For a flag:               vllm serve --help=max-model-len  (_ or - accepted)",
        "Documentation:            https://docs.vllm.ai",
    ]
