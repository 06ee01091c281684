"""The flag table: every option of `vllm serve` in vLLM 0.11.x, as data.

The order is vLLM's registration order (which is the order argparse lists them in "ambiguous
option: --x could match ..." and the order of "non-default args"): make_arg_parser
(vllm/entrypoints/openai/cli_args.py: model_tag, --headless, --api-server-count, --config),
FrontendArgs, then EngineArgs.add_cli_args group by group (ModelConfig, LoadConfig,
StructuredOutputsConfig, ParallelConfig, CacheConfig, MultiModalConfig, LoRAConfig,
ObservabilityConfig, SchedulerConfig, VllmConfig), then --disable-log-stats and AsyncEngineArgs.
Reconstructed from vLLM 0.11's sources and `vllm serve --help=all`; the kinds follow vLLM's
get_kwargs(): a bool field becomes argparse.BooleanOptionalAction (so `--no-x` exists too),
Optional[X] is wrapped in optional_type (so "None" and "" mean None), list[X] takes nargs="+",
a Literal gives sorted choices. Every long flag is listed, including ones the simulator ignores,
so that prefix abbreviations resolve (or clash) exactly as they would.

kind: str ostr int oint hint ohint float ofloat bool true json loads olist ilist token append
      choice ochoice ichoice (choices in `choices`), config:<Class> (a dataclass as JSON)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .usage import DEFAULT_MODEL


@dataclass(frozen=True)
class Flag:
    names: tuple[str, ...]
    kind: str
    default: Any = None
    choices: tuple[Any, ...] = ()


def _f(*names: str, kind: str = "ostr", default: Any = None, choices: Sequence[Any] = ()) -> Flag:
    return Flag(tuple(names), kind, default, tuple(choices))


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

FLAGS: tuple[Flag, ...] = (
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
    name for flag in FLAGS for name in flag.names if name.startswith("--")
)
