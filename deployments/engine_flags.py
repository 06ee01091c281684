"""Engine flags read the way vLLM and SGLang read them. Pure: strings in, dataclasses out.

What serves, and how it is exposed, comes only from a deployment's own fields: the model (path
and served name), tensor-parallel size, context length, port and bind address. The engines'
parsers are generous (argparse with prefix abbreviations, vLLM's underscores-for-dashes, a YAML
`--config` file, `--flag value` or `--flag=value`, the last occurrence winning), so extra
arguments are read here with the same generosity before anything is decided about them:

- RESERVED flags are set by a deployment field; extra arguments may not give them in any
  spelling, and the refusal names the field to use instead.
- SENSITIVE flags change what the server computes or who can reach it; any change to them needs
  the approval a model swap needs, and they can never be declared harmless.
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
    "--model-tag": "the deployment's model field (pick the model from the catalog)",
    "--served-model-name": "the served name of the deployment's model (in the catalog)",
    "--tensor-parallel-size": "the deployment's tensor_parallel_size field",
    "--tp-size": "the deployment's tensor_parallel_size field",
    "--tp": "the deployment's tensor_parallel_size field",
    "--max-model-len": "the deployment's max_model_len field",
    "--context-length": "the deployment's max_model_len field",
    "--port": "the deployment's port field",
    "--host": "the deployment's bind_address field",
    "--uds": "the deployment's bind_address and port fields",
    # A config file could set any of the above behind the reviewer's back.
    "--config": "the deployment's fields and extra arguments, never by a config file",
}

# flag -> why a change to it needs a second person. Documented in the README.
SENSITIVE: dict[str, str] = {
    "--trust-remote-code": "runs Python code shipped with the model repository",
    "--api-key": "controls who may call the server",
    "--allowed-local-media-path": "lets API callers read files on the host",
    "--allowed-origins": "controls which web origins may call the server",
    "--allowed-methods": "controls which web origins may call the server",
    "--allowed-headers": "controls which web origins may call the server",
    "--allow-credentials": "controls which web origins may call the server",
    "--ssl-keyfile": "changes how the server is reached",
    "--ssl-certfile": "changes how the server is reached",
    "--ssl-ca-certs": "changes how the server is reached",
    "--ssl-cert-reqs": "changes how the server is reached",
    "--root-path": "changes how the server is reached",
    "--middleware": "imports and runs arbitrary Python in the server",
    "--tool-parser-plugin": "imports and runs arbitrary Python in the server",
    "--enable-auto-tool-choice": "lets the model call tools on its own",
    "--chat-template": "changes every prompt the model sees",
    "--tokenizer": "changes how text becomes tokens (what serves)",
    "--tokenizer-path": "changes how text becomes tokens (what serves)",
    "--tokenizer-mode": "changes how text becomes tokens (what serves)",
    "--revision": "loads other weights (what serves)",
    "--code-revision": "loads other model code (what serves)",
    "--tokenizer-revision": "changes how text becomes tokens (what serves)",
    "--load-format": "changes how the weights are read (what serves)",
    "--download-dir": "loads weights from elsewhere (what serves)",
    "--hf-overrides": "overrides the model's own configuration (what serves)",
    "--hf-token": "a credential in the unit file",
    "--admin-api-key": "controls who may call the server's admin endpoints (SGLang)",
    "--quantization": "changes the numerics (what serves)",
    "--dtype": "changes the numerics (what serves)",
    "--kv-cache-dtype": "changes the numerics (what serves)",
    "--speculative-config": "loads a second model (what serves)",
    "--speculative-draft-model-path": "loads a second model (what serves)",
    "--enable-lora": "serves adapters on top of the model (what serves)",
    "--lora-modules": "serves adapters on top of the model (what serves)",
    "--lora-paths": "serves adapters on top of the model (what serves)",
    "--pipeline-parallel-size": "changes how many GPUs serve and the memory each needs",
    "--pp-size": "changes how many GPUs serve and the memory each needs",
    "--data-parallel-size": "changes how many GPUs serve and the memory each needs",
    "--dp-size": "changes how many GPUs serve and the memory each needs",
    "--base-gpu-id": "changes which GPUs serve",
    "--data-parallel-address": "joins other machines (changes how the server is reached)",
    "--data-parallel-rpc-port": "joins other machines (changes how the server is reached)",
    "--dist-init-addr": "joins other machines (changes how the server is reached)",
    "--nnodes": "joins other machines (changes how the server is reached)",
    "--node-rank": "joins other machines (changes how the server is reached)",
    "--headless": "runs without the API server (changes what serves)",
    "--kv-transfer-config": "sends the KV cache to other machines",
    "--distributed-executor-backend": "changes how workers are started",
}

# Flags whose value the fit check reads. Known here so that their abbreviations resolve too.
FIT: dict[str, str] = {
    "--gpu-memory-utilization": "share of each GPU's memory vLLM may use",
    "--mem-fraction-static": "share of each GPU's memory SGLang may use",
}

# Switches that take no value (so a word after one is not its value).
BOOLEAN = {
    "--trust-remote-code",
    "--enable-auto-tool-choice",
    "--enable-lora",
    "--headless",
    "--allow-credentials",
    "--enforce-eager",
    "--enable-prefix-caching",
    "--enable-chunked-prefill",
    "--enable-expert-parallel",
    "--disable-log-requests",
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
# hosts' engine versions differ, so a choice list is the union of vLLM 0.11 (the version the
# simulator replicates, simulator/vllm_cli/flags.py), later vLLM releases and SGLang.


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
    "turboquant_k3v4_nc", "turboquant_3bit_nc",
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

KNOWN = sorted({*RESERVED, *SENSITIVE, *FIT, *BOOLEAN, *VALUES})
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
    if name in KNOWN:
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
    return name


def resolve_flag(spelled: str) -> str:
    """The flag the engine reads `spelled` as: dashes for underscores, and a prefix
    abbreviation of a flag this module knows expanded to that flag. A flag this module does not
    know is returned as spelled (with dashes); nothing that serves or exposes depends on it.
    Raises EngineArgRefused when it abbreviates more than one known flag."""
    name = spelled.replace("_", "-")
    if name.startswith("--no-"):
        base = _resolve_known("--" + name[5:])
        if base in KNOWN:
            return "--no-" + base[2:]
    return _resolve_known(name)


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
