"""Engine flags read the way vLLM and SGLang read them. Pure: strings in, dataclasses out.

What serves, and how it is exposed, comes only from a deployment's own fields: the model (path
and served name), tensor-parallel size, context length, port and bind address. The engines'
parsers are generous (argparse with prefix abbreviations, vLLM's underscores-for-dashes, a YAML
`--config` file, `--flag value` or `--flag=value`, the last occurrence winning), so extra
arguments are read here with the same generosity before anything is decided about them, and a
flag's second name (ALIASES: vLLM's `--device-memory-utilization` is `--gpu-memory-utilization`)
is read as the flag it names, in the plan, the fit check and every list below:

- RESERVED flags are set by a deployment field; extra arguments may not give them in any
  spelling, and the refusal names the field to use instead.
- SENSITIVE flags change what the server computes or who can reach it, load code, open listeners,
  send data off the host, load a second model, choose GPUs or read files; any change to them
  needs the approval a model swap needs, the approver reads why, and they can never be declared
  harmless.
- REMOVED flags no longer exist in the pinned vLLM, which would refuse to start with them: they
  are refused, saying what to use instead.
- Everything else needs approval too when it changes, unless an administrator listed the flag
  in the HARMLESS_ENGINE_FLAGS setting.

The values of the flags in VALUES are checked as the engines check them (argparse's type and
choices, and the range checks of their configs), so that a value the engine would refuse at
start-up is refused here, at request time, instead of reaching an approver. `--flag value` and
`--flag=value` are one and the same reading. No refusal echoes a value that looks like a
secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from django.core.exceptions import ValidationError

from controlplane.redaction import is_secret_name, looks_secret
from hosts.validators import ENGINE_ARG_RE

# flag -> the deployment field that sets it. Both engines' spellings, since one deployment can
# move from one engine to the other.
RESERVED: dict[str, str] = {
    "--model": "the deployment's model field (pick the model from the catalog)",
    "--model-path": "the deployment's model field (pick the model from the catalog)",
    "--served-model-name": "the served name of the deployment's model (in the catalog)",
    "--tensor-parallel-size": "the deployment's tensor_parallel_size field",
    "--tp-size": "the deployment's tensor_parallel_size field",
    "--max-model-len": "the deployment's max_model_len field",
    "--context-length": "the deployment's max_model_len field",
    "--port": "the deployment's port field",
    "--host": "the deployment's bind_address field",
    "--uds": "the deployment's bind_address and port fields",
    # How long a stopping server drains; systemd's stop timeout is written to match it.
    "--shutdown-timeout": "the deployment's drain_grace_seconds field",
    # A config file could set any of the above behind the reviewer's back.
    "--config": "the deployment's fields and extra arguments, never by a config file",
}

# Why a change to a flag needs a second person, in the words the approver reads. The categories
# (docs/reference/change-kinds.md lists them under "What serves is what was approved"); every
# option of the pinned
# vLLM was read for them (tests/deployments/test_engine_flags_capture.py holds the tables to
# its parser's capture, tests/real_engine/captures/vllm-0.32.0-flags.json).
_CODE = "imports and runs Python code named in its value"
_CODE_CONFIG = "can name Python code for the engine to import and run"
_LISTENS = "opens another network listener on the host"
_ENDPOINTS = "adds endpoints to the API server"
_SENDS = "sends data off the host"
_JOINS = "joins other machines (changes how the server is reached)"
_GPUS = "changes how many GPUs serve and the memory each needs"
_WHICH_GPUS = "changes which GPUs serve"
_MEMORY = "sizes GPU memory past the share the fit check reads"
_SECOND_MODEL = "loads a second model (what serves)"
_ADAPTERS = "serves adapters on top of the model (what serves)"
_WEIGHTS = "changes which weights are read and how (what serves)"
_NUMERICS = "changes the numerics (what serves)"
_TOKENS = "changes how text becomes tokens (what serves)"
_PROMPTS = "changes every prompt the model sees"
_OUTPUTS = "changes what the model answers by default (what serves)"
_READS = "reads files on the host"
_WRITES = "writes files on the host"
_CORS = "controls which web origins may call the server"
_TLS = "changes how the server is reached"
_CALLERS = "trusts what API callers send (only for trusted callers, says vLLM)"
_LOGS_PROMPTS = "writes callers' prompts or outputs to the journal"
_ACCESS_LOG = "hides requests from the server's access log"

# flag -> why a change to it needs a second person. Documented in docs/reference/change-kinds.md.
SENSITIVE: dict[str, str] = {
    # Code the engine imports and runs.
    "--trust-remote-code": "runs Python code shipped with the model repository",
    "--middleware": "imports and runs arbitrary Python in the server",
    "--tool-parser-plugin": "imports and runs arbitrary Python in the server",
    "--reasoning-parser-plugin": _CODE + " (a reasoning parser plugin)",
    "--io-processor-plugin": _CODE + " (an input/output processor plugin)",
    "--worker-cls": _CODE + " (the class every GPU worker runs)",
    "--worker-extension-cls": _CODE + " (a class mixed into every GPU worker)",
    "--scheduler-cls": _CODE + " (the scheduler class)",
    "--logits-processors": _CODE + " (logits processor classes, or their source)",
    "--model-class-overrides": _CODE + " (model classes, as module:class)",
    "--logging-config": _CODE_CONFIG + " (a Python logging config file) and " + _READS,
    "--log-config-file": _CODE_CONFIG + " (a Python logging config file) and " + _READS,
    "--compilation-config": _CODE_CONFIG
    + " (a compile backend, inductor passes) and "
    + _WRITES
    + " (cache, debug dumps)",
    "--structured-outputs-config": _CODE_CONFIG + " (a reasoning parser plugin)",
    "--ec-manager-config": _CODE_CONFIG + " (an encoder cache manager class)",
    "--additional-config": "passes settings the control plane cannot read to the platform's plugin",
    # Listeners, endpoints and data that leave the host.
    "--grpc": "serves gRPC on the port instead of the HTTP API (changes how the server is reached)",
    "--grpc-port": _LISTENS + " (gRPC inference and control services)",
    "--api-server-count": "changes how many API server processes listen (0: none)",
    "--headless": "runs without the API server (changes what serves)",
    "--tokens-only": "serves only the tokens-in, tokens-out endpoint (changes what serves)",
    "--enable-scale-out": _ENDPOINTS + " (/render, /inference/v1/generate, ...)",
    "--enable-tokenizer-info-endpoint": _ENDPOINTS + " (/tokenizer_info, which shows the chat "
    "template)",
    "--data-parallel-supervisor-port": _LISTENS + " (the data-parallel supervisor's health)",
    "--data-parallel-multi-port-external-lb": _LISTENS + " (an API server per data-parallel rank)",
    "--kv-events-config": _LISTENS + " and " + _SENDS + " (KV cache events over ZeroMQ)",
    "--otlp-traces-endpoint": _SENDS + " (OpenTelemetry traces to the URL it names)",
    "--collect-detailed-traces": _SENDS + " (more detail in the traces sent off the host)",
    "--tool-server": "calls tool servers at the addresses it names, or runs model-written code "
    "(demo)",
    "--allowed-media-domains": "controls which web addresses the server fetches media from",
    "--kv-transfer-config": "sends the KV cache to other machines; "
    + _CODE_CONFIG
    + " (a KV connector module)",
    "--ec-transfer-config": "sends the encoder cache to other machines; "
    + _CODE_CONFIG
    + " (an EC connector module)",
    "--weight-transfer-config": "lets another process replace the weights while serving "
    "(what serves)",
    "--data-parallel-address": _JOINS,
    "--data-parallel-rpc-port": _JOINS,
    "--data-parallel-rank": _JOINS,
    "--data-parallel-start-rank": _JOINS,
    "--data-parallel-hybrid-lb": _JOINS,
    "--data-parallel-external-lb": _JOINS,
    "--data-parallel-backend": _JOINS + " (ray: a Ray cluster)",
    "--master-addr": _JOINS,
    "--master-port": _JOINS,
    "--dist-init-addr": _JOINS,
    "--nnodes": _JOINS,
    "--node-rank": _JOINS,
    "--distributed-executor-backend": "changes how workers are started",
    # Who may call the server, and how it is reached.
    "--api-key": "controls who may call the server",
    "--admin-api-key": "controls who may call the server's admin endpoints (SGLang)",
    "--allowed-origins": _CORS,
    "--allowed-methods": _CORS,
    "--allowed-headers": _CORS,
    "--allow-credentials": _CORS,
    "--ssl-keyfile": _TLS,
    "--ssl-certfile": _TLS,
    "--ssl-ca-certs": _TLS,
    "--ssl-cert-reqs": _TLS,
    "--ssl-ciphers": _TLS,
    "--enable-ssl-refresh": _TLS + " (reloads the TLS files when they change)",
    "--root-path": _TLS,
    "--h11-max-incomplete-event-size": "changes the server's limits against oversized HTTP "
    "requests",
    "--h11-max-header-count": "changes the server's limits against oversized HTTP requests",
    # What API callers may make the server do.
    "--allowed-local-media-path": "lets API callers read files on the host",
    "--enable-auto-tool-choice": "lets the model call tools on its own",
    "--trust-request-chat-template": _CALLERS + " (their own chat templates)",
    "--trust-request-mm-kwargs": _CALLERS + " (multimodal processing settings)",
    "--enable-prompt-embeds": _CALLERS + " (raw embedding tensors)",
    "--enable-mm-embeds": _CALLERS + " (raw multimodal embedding tensors)",
    "--enable-log-requests": _LOGS_PROMPTS,
    "--enable-log-outputs": _LOGS_PROMPTS,
    "--disable-uvicorn-access-log": _ACCESS_LOG,
    "--disable-access-log-for-endpoints": _ACCESS_LOG,
    # What serves: weights, second models, adapters, numerics, tokens, prompts.
    "--tokenizer": _TOKENS,
    "--tokenizer-path": _TOKENS,
    "--tokenizer-mode": _TOKENS,
    "--tokenizer-revision": _TOKENS,
    "--revision": "loads other weights (what serves)",
    "--code-revision": "loads other model code (what serves)",
    "--load-format": "changes how the weights are read (what serves)",
    "--download-dir": "loads weights from elsewhere (what serves)",
    "--model-loader-extra-config": _WEIGHTS,
    "--ignore-patterns": _WEIGHTS + " (which of the model's files load)",
    "--hf-overrides": "overrides the model's own configuration (what serves)",
    "--hf-config-path": "reads the model's configuration from elsewhere (what serves)",
    "--hf-token": "a credential in the unit file",
    "--watermark-config": "watermarks every answer with a key (a secret in the unit file)",
    "--runner": "changes what the model is run as (what serves)",
    "--convert": "changes what the model is run as (what serves)",
    "--quantization": _NUMERICS,
    "--quantization-config": _NUMERICS,
    "--dtype": _NUMERICS,
    "--kv-cache-dtype": _NUMERICS,
    "--speculative-config": _SECOND_MODEL + "; " + _CODE_CONFIG + " (a proposer class)",
    "--spec-model": _SECOND_MODEL,
    "--spec-method": _SECOND_MODEL,
    "--spec-tokens": _SECOND_MODEL,
    "--speculative-draft-model-path": _SECOND_MODEL,
    "--enable-lora": _ADAPTERS,
    "--lora-modules": _ADAPTERS,
    "--lora-paths": _ADAPTERS,
    "--default-mm-loras": _ADAPTERS,
    "--chat-template": _PROMPTS,
    "--default-chat-template-kwargs": _PROMPTS,
    "--generation-config": _OUTPUTS + "; " + _READS + " (the folder it names)",
    "--override-generation-config": _OUTPUTS,
    "--mm-encoder-fp8-scale-path": _READS + " (encoder scales)",
    "--mm-encoder-fp8-scale-save-path": _WRITES + " (encoder scales)",
    "--profiler-config": _WRITES + " (profiler traces)",
    # GPUs and memory the fit check sizes.
    "--pipeline-parallel-size": _GPUS,
    "--pp-size": _GPUS,
    "--data-parallel-size": _GPUS,
    "--dp-size": _GPUS,
    "--data-parallel-size-local": _GPUS,
    "--prefill-context-parallel-size": _GPUS,
    "--base-gpu-id": _WHICH_GPUS,
    "--device-ids": _WHICH_GPUS,
    "--kv-cache-memory-bytes": _MEMORY + " (the KV cache in bytes)",
    "--num-gpu-blocks-override": _MEMORY + " (the KV cache in blocks)",
}

# Flags whose value the fit check reads. Known here so that their abbreviations resolve too.
FIT: dict[str, str] = {
    "--gpu-memory-utilization": "share of each GPU's memory vLLM may use",
    "--mem-fraction-static": "share of each GPU's memory SGLang may use",
}

# Second names of one flag: the engine reads them as the flag itself (same dest), so the
# control plane does too, everywhere (the plan, the fit check, the reserved and sensitive
# lists). vLLM 0.32 has one long one.
ALIASES: dict[str, str] = {
    "--device-memory-utilization": "--gpu-memory-utilization",
}

# vLLM 0.32's short options, as the flags they stand for. Extra arguments may not use them (a
# refusal says to spell the flag out); a unit's command line is read with them.
SHORT_OPTIONS: dict[str, str] = {
    "-asc": "--api-server-count",
    "-q": "--quantization",
    "-pp": "--pipeline-parallel-size",
    "-n": "--nnodes",
    "-r": "--node-rank",
    "-tp": "--tensor-parallel-size",
    "-dcp": "--decode-context-parallel-size",
    "-pcp": "--prefill-context-parallel-size",
    "-dp": "--data-parallel-size",
    "-dpn": "--data-parallel-rank",
    "-dpr": "--data-parallel-start-rank",
    "-dpl": "--data-parallel-size-local",
    "-dpa": "--data-parallel-address",
    "-dpp": "--data-parallel-rpc-port",
    "-dpb": "--data-parallel-backend",
    "-dph": "--data-parallel-hybrid-lb",
    "-dpe": "--data-parallel-external-lb",
    "-dpm": "--data-parallel-multi-port-external-lb",
    "-ep": "--enable-expert-parallel",
    "-sc": "--speculative-config",
    "-dc": "--diffusion-config",
    "-cc": "--compilation-config",
    "-ac": "--attention-config",
}

# Flags the pinned vLLM no longer has, refused in words: the engine would refuse to start.
# Only their exact spelling (or an abbreviation of nothing else) reads as them.
REMOVED: dict[str, str] = {
    "--disable-log-requests": "vLLM 0.32 no longer has --disable-log-requests (logging "
    "requests is off by default; --enable-log-requests turns it on)",
}

# SGLang's own flags (sglang/srt/server_args.py) that vLLM does not have. One deployment can
# move between the engines, so both engines' spellings are read; every other flag named here is
# one of the pinned vLLM's.
SGLANG_FLAGS = frozenset(
    {
        "--model-path",
        "--tp-size",
        "--pp-size",
        "--dp-size",
        "--context-length",
        "--tokenizer-path",
        "--admin-api-key",
        "--speculative-draft-model-path",
        "--lora-paths",
        "--base-gpu-id",
        "--dist-init-addr",
        "--mem-fraction-static",
        "--max-running-requests",
    }
)

# vLLM flags whose whole name begins a longer flag's name above: known so that they read as
# themselves (argparse takes an exact name first), never as an abbreviation of the longer flag.
EXACT = {"--reasoning-parser", "--watermark"}

# Switches that take no value (so a word after one is not its value).
BOOLEAN = {
    "--trust-remote-code",
    "--enable-auto-tool-choice",
    "--enable-lora",
    "--headless",
    "--grpc",
    "--tokens-only",
    "--enable-scale-out",
    "--enable-tokenizer-info-endpoint",
    "--data-parallel-multi-port-external-lb",
    "--data-parallel-hybrid-lb",
    "--data-parallel-external-lb",
    "--allow-credentials",
    "--enable-ssl-refresh",
    "--trust-request-chat-template",
    "--trust-request-mm-kwargs",
    "--enable-prompt-embeds",
    "--enable-mm-embeds",
    "--enable-log-requests",
    "--enable-log-outputs",
    "--disable-uvicorn-access-log",
    "--enforce-eager",
    "--enable-prefix-caching",
    "--enable-chunked-prefill",
    "--enable-expert-parallel",
    "--disable-log-stats",
}

# Values that must never be stored in a unit file, an audit event or a page (so is the value of
# any other flag whose name says it is a secret: controlplane.redaction.is_secret_name).
SECRET_VALUED = {"--api-key", "--hf-token", "--admin-api-key"}


# --- values, checked as the engines check them ---------------------------------------------
# Types from argparse (Python's int() and float(), vLLM's human_readable_int, `optional_type`
# taking "None" for the engine's default), choices from the engines' parsers, ranges from their
# configs (vLLM's CacheConfig: 0 < gpu_memory_utilization <= 1). A flag spelled for either
# engine is checked against what either accepts: one deployment can move between engines, and
# hosts' engine versions differ, so a choice list is the union of vLLM 0.11, the pinned vLLM
# 0.32 (whose choices a test holds these lists to), other vLLM releases and SGLang.


def human_readable_int(text: str) -> int:
    """vLLM's type for token counts: `32768`, `32k` (thousands) or `32K` (1024s)."""
    text = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text)
    if not match:
        return int(text)
    number, suffix = match.groups()
    if suffix.islower():
        return int(float(number) * 1000 ** ("kmgt".index(suffix) + 1))
    return int(number) * 1024 ** ("KMGT".index(suffix) + 1)  # "1.5K" raises, as in vLLM


def _whole(
    low: int, high: int | None = None, *, human: bool = False, optional: bool = False
) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        if optional and text in ("", "None"):  # optional_type: the engine's default
            return True
        number = (human_readable_int if human else int)(text)
        return number >= low and (high is None or number <= high)

    return check


def _fraction(text: str) -> bool:
    return 0 < float(text) <= 1  # NaN and infinities compare false


def _whole_in(choices: tuple[int, ...]) -> Callable[[str], bool]:
    return lambda text: int(text) in choices  # type=int, then the choices


def _one_of(choices: tuple[str, ...]) -> Callable[[str], bool]:
    return lambda text: text in choices


DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
KV_CACHE_DTYPES = (
    # vLLM 0.11
    "auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
    # later vLLM
    "float16", "fp8_ds_mla", "nvfp4", "nvfp4_ds_mla", "nvfp4_4over6", "int4_per_token_head",
    "int8", "int8_per_token_head", "fp8_per_token_head", "turboquant_k8v4", "turboquant_4bit_nc",
    "turboquant_k3v4_nc", "turboquant_3bit_nc", "ultraquant_4bit",
    # SGLang
    "bf16", "mxfp8", "fp4_e2m1", "fp4_mx_block16",
)  # fmt: skip
QUANTIZATION_METHODS = (
    # vLLM 0.11
    "awq", "deepspeedfp", "tpu_int8", "fp8", "ptpc_fp8", "fbgemm_fp8", "fp_quant", "modelopt",
    "modelopt_fp4", "bitblas", "gguf", "gptq_marlin_24", "gptq_marlin", "gptq_bitblas",
    "awq_marlin", "gptq", "compressed-tensors", "bitsandbytes", "hqq", "experts_int8", "ipex",
    "quark", "moe_wna16", "torchao", "auto-round", "rtn", "inc", "mxfp4", "petit_nvfp4",
    # earlier and later vLLM
    "aqlm", "deepgemm_fp8", "marlin", "qqq", "neuron_quant", "mxfp8", "cpu_awq",
    # SGLang
    "modelopt_fp8", "modelopt_mixed", "nvfp4_online", "w8a8_int8", "w8a8_fp8", "w4afp8", "qoq",
    "auto-round-int8", "modelslim", "mxfp_w4a8", "quark_int4fp8_moe", "quark_mxfp4", "mlx_q4",
    "mlx_q8", "unquant", "humming",
)  # fmt: skip
BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
EXECUTOR_BACKENDS = ("external_launcher", "mp", "ray", "uni")

_POSITIVE = "a positive whole number"
_FRACTION = "a number between 0 and 1"
_FROM_ZERO = "a whole number, 0 or more"


def _choices(choices: tuple[object, ...]) -> str:
    return "one of " + ", ".join(str(c) for c in choices)


# flag -> (what the engine accepts, in words; whether `text` is such a value). A check may raise
# ValueError or OverflowError, which means no.
VALUES: dict[str, tuple[str, Callable[[str], bool]]] = {
    "--gpu-memory-utilization": (_FRACTION, _fraction),
    "--mem-fraction-static": (_FRACTION, _fraction),
    "--max-num-seqs": (_POSITIVE, _whole(1, optional=True)),
    "--max-num-batched-tokens": (
        f"{_POSITIVE} (8192, or 8k)",
        _whole(1, human=True, optional=True),
    ),
    "--max-running-requests": (_POSITIVE, _whole(1)),
    "--pipeline-parallel-size": (_POSITIVE, _whole(1)),
    "--pp-size": (_POSITIVE, _whole(1)),
    "--data-parallel-size": (_POSITIVE, _whole(1)),
    "--dp-size": (_POSITIVE, _whole(1)),
    "--nnodes": (_POSITIVE, _whole(1)),
    "--node-rank": (_FROM_ZERO, _whole(0)),
    "--base-gpu-id": (_FROM_ZERO, _whole(0)),
    "--data-parallel-rpc-port": ("a port from 1 to 65535", _whole(1, 65535, optional=True)),
    "--block-size": (_choices(BLOCK_SIZES), _whole_in(BLOCK_SIZES)),
    "--dtype": (_choices(DTYPES), _one_of(DTYPES)),
    "--kv-cache-dtype": (_choices(KV_CACHE_DTYPES), _one_of(KV_CACHE_DTYPES)),
    "--quantization": (_choices(QUANTIZATION_METHODS), _one_of(QUANTIZATION_METHODS)),
    "--distributed-executor-backend": (_choices(EXECUTOR_BACKENDS), _one_of(EXECUTOR_BACKENDS)),
}

KNOWN = sorted({*RESERVED, *SENSITIVE, *FIT, *BOOLEAN, *VALUES, *ALIASES, *EXACT})
_FLAG_NAME = re.compile(r"--[a-z0-9][a-z0-9_-]{0,63}")
_ENGINE_ARG = re.compile(ENGINE_ARG_RE)
# argparse's test for a word that is a negative number rather than an option (Python 3.11):
# `--seed -1` gives --seed the value -1, as `--seed=-1` does.
_NEGATIVE_NUMBER = re.compile(r"-\d+|-\d*\.\d+")
_NOT_SHOWN = "a value that looks like a secret, not shown"
_SHORT_OPTION = re.compile(r"-[A-Za-z]{1,4}[0-9]?")  # -q, -tp, -O3: named in the refusal


class EngineArgRefused(ValueError):
    """An extra argument is not acceptable; the message says which and what to do instead."""


@dataclass(frozen=True)
class EngineArg:
    """One extra argument, with its flag spelled as the engine will understand it."""

    flag: str  # the canonical long name, e.g. --gpu-memory-utilization
    value: str | None

    def __str__(self) -> str:
        return self.flag if self.value is None else f"{self.flag}={self.value}"


def base_flag(flag: str) -> str:
    """`--no-x` is about `--x` (argparse's BooleanOptionalAction)."""
    return "--" + flag[5:] if flag.startswith("--no-") else flag


def _resolve_known(name: str) -> str:
    if name in KNOWN or name in REMOVED:
        return name
    matches = [k for k in KNOWN if k.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        reserved = [m for m in matches if m in RESERVED]
        if reserved:
            return reserved[0]  # refused by the caller, whichever one the engine would pick
        raise EngineArgRefused(
            f"{name} is ambiguous: the engine may read it as any of {', '.join(matches)}; "
            "spell the flag out in full"
        )
    # An abbreviation of a flag the engine no longer has abbreviates nothing it has.
    removed = [k for k in REMOVED if k.startswith(name)]
    return removed[0] if len(removed) == 1 else name


def resolve_flag(spelled: str) -> str:
    """The flag the engine reads `spelled` as: dashes for underscores, a prefix abbreviation of
    a flag this module knows expanded to that flag, and a second name (ALIASES) as the flag it
    names. A flag this module does not know is returned as spelled (with dashes); nothing that
    serves or exposes depends on it. Raises EngineArgRefused when it abbreviates more than one
    known flag."""
    name = spelled.replace("_", "-")
    if name.startswith("--no-"):
        base = _resolve_known("--" + name[5:])
        if base in KNOWN:
            return "--no-" + ALIASES.get(base, base)[2:]
    resolved = _resolve_known(name)
    return ALIASES.get(resolved, resolved)


def is_switch(flag: str) -> bool:
    """Whether `flag` (canonical) takes no value: a word after it is not its value."""
    base = base_flag(flag)
    return base in BOOLEAN or base in REMOVED


def sensitive_reason(flag: str) -> str | None:
    """Why a change to `flag` (canonical; a dotted `--x.key` is part of `--x`) needs a second
    person, if it is one of SENSITIVE."""
    return SENSITIVE.get(base_flag(flag).partition(".")[0])


def _shown(word: str) -> str:
    """A word someone typed, for a refusal: as typed (cut short), unless it looks like a
    secret."""
    if looks_secret(word):
        return _NOT_SHOWN
    return word if len(word) <= 60 else word[:57] + "..."


def is_secret_flag(base: str) -> bool:
    """Whether a flag's value is a secret: the engines' own, or any valued flag so named."""
    return base in SECRET_VALUED or (base not in BOOLEAN and is_secret_name(base))


def check_value(flag: str, value: str) -> None:
    """Refuses `value` for `flag` (canonical) when it looks like a secret, or when the engine
    would refuse it: the refusal says which flag and what the engine accepts."""
    if looks_secret(value):
        raise EngineArgRefused(
            f"the value of {flag} looks like a secret (not shown): it would be stored in the "
            "unit file, the audit log and the pages; put secrets in the unit's environment file"
        )
    rule = VALUES.get(base_flag(flag))
    if rule is None:
        return
    accepts, check = rule
    try:
        ok = check(value)
    except (ValueError, OverflowError):
        ok = False
    if not ok:
        raise EngineArgRefused(f"{flag} must be {accepts} (got {_shown(value)})")


def _read_flag(arg: str) -> tuple[str, str | None]:
    """One word that starts with `--`: its flag as the engine reads it, and the value given
    with `=` (None without). Refuses reserved and secret flags in any spelling."""
    spelled, eq, value = arg.partition("=")
    if looks_secret(spelled):
        raise EngineArgRefused("a flag that looks like a secret (not shown) is not a flag name")
    if "." in spelled:
        raise EngineArgRefused(
            f"{_shown(spelled)} sets a field inside a JSON argument; give the whole argument "
            "instead"
        )
    if not _FLAG_NAME.fullmatch(spelled):
        raise EngineArgRefused(f"{_shown(spelled)} is not a flag name the control plane accepts")
    flag = resolve_flag(spelled)
    base = base_flag(flag)
    if base in REMOVED:
        raise EngineArgRefused(REMOVED[base])
    if base in RESERVED:
        spelled_as = "" if spelled == base else f" (the engine may read {spelled} as {base})"
        raise EngineArgRefused(
            f"{base}{spelled_as} is set by {RESERVED[base]}, not by extra arguments"
        )
    if is_secret_flag(base):  # before its value is looked at, which is never shown
        raise EngineArgRefused(
            f"{base} would put a secret in the unit file, the audit log and the pages; "
            "set it in the unit's environment file instead (e.g. VLLM_API_KEY)"
        )
    if base in BOOLEAN and eq:
        raise EngineArgRefused(f"{flag} is a switch and takes no value")
    if base in VALUES and flag != base:
        raise EngineArgRefused(f"{flag} does not exist: {base} takes a value, {VALUES[base][0]}")
    return flag, value if eq else None


def _needs_value(flag: str) -> None:
    """A flag known to take a value, left without one (argparse: "expected one argument")."""
    if flag in VALUES:
        raise EngineArgRefused(f"{flag} needs a value: {VALUES[flag][0]}")


def parse_extra_args(args: Sequence[str]) -> list[EngineArg]:
    """Read extra arguments as the engine would: `--flag`, `--flag=value` or `--flag value`
    (the same reading either way, a negative number included), underscores for dashes, prefix
    abbreviations. Refuses reserved and secret flags in any spelling, and values the engine
    would refuse for the flags in VALUES."""
    parsed: list[EngineArg] = []
    pending: str | None = None  # a flag still waiting for a separate value
    for arg in args:
        if not isinstance(arg, str) or not arg:
            raise EngineArgRefused("an engine argument is empty or not text")
        if pending is not None:
            if not arg.startswith("-") or _NEGATIVE_NUMBER.fullmatch(arg):
                check_value(pending, arg)
                parsed.append(EngineArg(pending, arg))
                pending = None
                continue
            _needs_value(pending)
            parsed.append(EngineArg(pending, None))
            pending = None
        if not arg.startswith("-"):
            after = ""
            if parsed and base_flag(parsed[-1].flag) in BOOLEAN:
                after = f"; {parsed[-1].flag} takes no value"
            if looks_secret(arg):
                raise EngineArgRefused(
                    f"a word that looks like a secret (not shown) is not a flag{after}"
                )
            raise EngineArgRefused(f"{_shown(arg)!r} is not a flag{after}")
        if not arg.startswith("--"):
            short = arg.partition("=")[0]
            named = short if _SHORT_OPTION.fullmatch(short) else "an argument with a single -"
            raise EngineArgRefused(
                f"{named} is a short option; use the long form (e.g. --tensor-parallel-size)"
            )
        flag, value = _read_flag(arg)
        if value is not None:
            check_value(flag, value)
            parsed.append(EngineArg(flag, value))
        elif base_flag(flag) in BOOLEAN:
            parsed.append(EngineArg(flag, None))
        else:
            pending = flag
    if pending is not None:
        _needs_value(pending)
        parsed.append(EngineArg(pending, None))
    return parsed


def normalise_extra_args(args: Sequence[str]) -> list[str]:
    """The canonical spelling stored on a deployment: one `--flag` or `--flag=value` each."""
    return [str(a) for a in parse_extra_args(args)]


def check_extra_args(value: object) -> list[str]:
    """What a person asks for, checked the one way the forms, the API, the model validators and
    the services share: a list of words read as the engine reads them (above), each of which,
    in its canonical `--flag` or `--flag=value` spelling, keeps to the safe alphabet. Returns
    the canonical spelling; raises EngineArgRefused, whose message never echoes a value that
    looks like a secret."""
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise EngineArgRefused("engine arguments must be a list of strings")
    canonical = normalise_extra_args(value)
    for arg in canonical:
        if not _ENGINE_ARG.fullmatch(arg):
            flag, _eq, shown = arg.partition("=")
            raise EngineArgRefused(
                f"the value of {flag} is not allowed: it may hold letters, digits and "
                f". _ : , / + - only (got {_shown(shown)})"
            )
    return canonical


def validate_extra_args(value: object) -> None:
    """Model-level validator: check_extra_args, raising ValidationError."""
    try:
        check_extra_args(value)
    except EngineArgRefused as exc:
        raise ValidationError(str(exc)) from exc


def carries_secret(words: Sequence[object]) -> bool:
    """Whether extra arguments hold a secret flag or a word that looks like a secret, so that a
    page does not show what was typed back."""
    for word in words:
        if not isinstance(word, str):
            continue
        if looks_secret(word):
            return True
        spelled = word.partition("=")[0]
        if _FLAG_NAME.fullmatch(spelled):
            try:
                if is_secret_flag(base_flag(resolve_flag(spelled))):
                    return True
            except EngineArgRefused:
                continue
    return False


def check_harmless_list(flags: Iterable[str]) -> list[str]:
    """Problems with an administrator's harmless list (for the settings check)."""
    problems = []
    for spelled in flags:
        try:
            flag = resolve_flag(spelled)
        except EngineArgRefused as exc:
            problems.append(str(exc))
            continue
        base = base_flag(flag)
        if base in RESERVED:
            problems.append(f"{spelled} is set by {RESERVED[base]}")
        elif base in SENSITIVE:
            problems.append(f"{spelled} can never be harmless: it {SENSITIVE[base]}")
    return problems
