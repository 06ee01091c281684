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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.core.exceptions import ValidationError

from hosts.validators import validate_engine_args as validate_engine_arg_syntax

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

# Values that must never be stored in a unit file, an audit event or a page.
SECRET_VALUED = {"--api-key", "--hf-token"}

KNOWN = sorted({*RESERVED, *SENSITIVE, *FIT, *BOOLEAN})
_FLAG_NAME = re.compile(r"--[a-z0-9][a-z0-9_-]{0,63}")


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


def parse_extra_args(args: Sequence[str]) -> list[EngineArg]:
    """Read extra arguments as the engine would: `--flag`, `--flag=value` or `--flag value`,
    underscores for dashes, prefix abbreviations. Refuses reserved flags in any spelling."""
    parsed: list[EngineArg] = []
    pending: str | None = None  # a flag still waiting for a separate value
    for arg in args:
        if not isinstance(arg, str) or not arg:
            raise EngineArgRefused(f"engine argument {arg!r} is empty or not text")
        if not arg.startswith("-"):
            if pending is None:
                after = f"; {parsed[-1].flag} takes no value" if parsed else ""
                raise EngineArgRefused(f"{arg!r} is not a flag{after}")
            parsed[-1] = EngineArg(parsed[-1].flag, arg)
            pending = None
            continue
        if not arg.startswith("--"):
            raise EngineArgRefused(
                f"{arg} is a short option; use the long form (e.g. --tensor-parallel-size)"
            )
        spelled, eq, value = arg.partition("=")
        if "." in spelled:
            raise EngineArgRefused(
                f"{spelled} sets a field inside a JSON argument; give the whole argument instead"
            )
        if not _FLAG_NAME.fullmatch(spelled):
            raise EngineArgRefused(f"{spelled} is not a flag name the control plane accepts")
        flag = resolve_flag(spelled)
        base = base_flag(flag)
        if base in RESERVED:
            spelled_as = "" if spelled == base else f" (the engine may read {spelled} as {base})"
            raise EngineArgRefused(
                f"{base}{spelled_as} is set by {RESERVED[base]}, not by extra arguments"
            )
        if base in SECRET_VALUED:
            raise EngineArgRefused(
                f"{base} would put a secret in the unit file, the audit log and the pages; "
                "set it in the unit's environment file instead (e.g. VLLM_API_KEY)"
            )
        if eq and base in BOOLEAN:
            raise EngineArgRefused(f"{flag} is a switch and takes no value")
        parsed.append(EngineArg(flag, value if eq else None))
        pending = None if eq or base in BOOLEAN else flag
    return parsed


def normalise_extra_args(args: Sequence[str]) -> list[str]:
    """The canonical spelling stored on a deployment: one `--flag` or `--flag=value` each."""
    return [str(a) for a in parse_extra_args(args)]


def validate_extra_args(value: object) -> None:
    """Model-level validator: the safe alphabet first, then the engine's reading of it."""
    validate_engine_arg_syntax(value)
    assert isinstance(value, list)
    try:
        parse_extra_args(value)
    except EngineArgRefused as exc:
        raise ValidationError(str(exc)) from exc


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
