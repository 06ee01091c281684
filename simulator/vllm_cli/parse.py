"""Reading a `vllm serve` command line into EngineArgs: the flexible steps, argparse, checks."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import posixpath
from collections.abc import Callable, Sequence
from typing import Any

from .engine_args import CliCrash, CliFailure, EngineArgs
from .flexible import flexible
from .parser import HelpExit, UsageError, defaults, has_option, parsers

REDACTED = "<redacted>"
SECRET_DESTS = frozenset({"api_key", "hf_token"})


def _validate(ns: argparse.Namespace, read_file: Callable[[str], str | None] | None) -> None:
    """validate_parsed_serve_args: what `vllm serve` checks before it starts anything (the cheap
    checks of vLLM 0.32's, vllm/entrypoints/launchers/cli_args.py)."""
    template = ns.chat_template
    if template is not None and read_file is not None and not any(c in template for c in "{}\n"):
        path = posixpath.normpath(template if template.startswith("/") else "/" + template)
        if read_file(path) is None:
            raise CliCrash(
                CliFailure(
                    "validate_chat_template",
                    "raise ValueError(",
                    f"ValueError: The supplied chat template string ({template}) appears "
                    "path-like, but doesn't exist!",
                )
            )
    if ns.enable_auto_tool_choice and not ns.tool_call_parser:
        raise CliCrash(
            CliFailure(
                "validate_parsed_serve_args",
                "raise TypeError(",
                "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser",
            )
        )
    if ns.enable_log_outputs and not ns.enable_log_requests:
        raise CliCrash(
            CliFailure(
                "validate_parsed_serve_args",
                "raise TypeError(",
                "TypeError: Error: --enable-log-outputs requires --enable-log-requests",
            )
        )
    if ns.sse_keep_alive_interval < 0:
        raise CliCrash(
            CliFailure(
                "validate_parsed_serve_args",
                "raise ValueError(",
                "ValueError: Error: --sse-keep-alive-interval must be a non-negative integer "
                "(0 disables keep-alive comments).",
            )
        )
    if ns.enable_per_request_metrics and ns.disable_log_stats:
        raise CliCrash(
            CliFailure(
                "validate_parsed_serve_args",
                "raise ValueError(",
                "ValueError: Error: --enable-per-request-metrics requires engine statistics "
                "logging; remove --disable-log-stats to enable per-request metrics.",
            )
        )


def _engine(binary: str, ns: argparse.Namespace, **extra: Any) -> EngineArgs:
    model = str(ns.model_tag if ns.model_tag is not None else ns.model)
    ns.model = model  # ServeSubcommand.cmd: the positional model wins
    names = tuple(str(n) for n in ns.served_model_name or () if n is not None) or (model,)
    non_default: list[tuple[str, object]] = []
    for dest, default in defaults():
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
        # --api-server-count defaults to None (one per data-parallel rank); 0 starts none.
        headless=bool(ns.headless) or (ns.api_server_count is not None and ns.api_server_count < 1),
        # -1 / auto: the longest context the memory holds, the model's own at most.
        max_model_len=None if ns.max_model_len == -1 else ns.max_model_len,
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
        shutdown_timeout=int(getattr(ns, "shutdown_timeout", 0) or 0),
        chat_template=ns.chat_template,
        reasoning_parser=str(ns.reasoning_parser or ""),
        non_default=tuple(non_default),
        **extra,
    )


def _parse(argv: tuple[str, ...], read_file: Callable[[str], str | None] | None) -> EngineArgs:
    binary = argv[0]
    failed = EngineArgs(binary=binary, model_path="", served_name="")
    try:
        processed, config_file, warnings = flexible(["serve", *argv[2:]], read_file, has_option)
    except CliCrash as exc:
        return dataclasses.replace(failed, cli_failure=exc.failure)
    except Exception as exc:  # vLLM would print a traceback too; never crash the simulator
        return dataclasses.replace(failed, cli_failure=_unexpected(exc))
    failed = dataclasses.replace(failed, config_file=config_file, warnings=warnings)
    try:
        main, _serve = parsers()
        ns = main.parse_args(processed)
        _validate(ns, read_file)
        return _engine(binary, ns, config_file=config_file, warnings=warnings)
    except UsageError as exc:
        return dataclasses.replace(failed, usage_error=exc.message, usage_prog=exc.prog)
    except HelpExit:
        return dataclasses.replace(failed, help_requested=True)
    except CliCrash as exc:
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


def with_environment_key(engine: EngineArgs, key: str) -> EngineArgs:
    """vLLM's `--api-key` defaults to the VLLM_API_KEY environment variable (envs.py): a server
    started without the flag but with the variable requires that key."""
    return dataclasses.replace(
        engine, api_key_set=True, api_key_sha256=(hashlib.sha256(key.encode()).hexdigest(),)
    )
