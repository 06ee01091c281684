"""The API key an inference server was started with, read from its unit the way systemd and
the engine read it, so that the probe and the change jobs can call the server as its own
clients do.

vLLM and SGLang take `--api-key KEY` (vLLM also reads VLLM_API_KEY from its environment). The
key is found in the probe's output before redaction: the unit's `systemctl cat` (its last
ExecStart=, with `${VARS}` expanded from Environment= and the EnvironmentFile= files, which the
probe reads too) and those files. It is returned to the caller, which keeps it in memory for
the requests it makes and never stores, logs or puts it on a command line.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from .common import ParseError
from .envfiles import assignments
from .unit_files import _logical_lines, expand_variables, parse_systemctl_cat

_EXEC_PREFIX = "-@:+!|"
ENV_KEY = "VLLM_API_KEY"


def unit_api_key(unit_cat: str, environment_files: Mapping[str, str]) -> str | None:
    """The key the unit's server requires, or None when its unit sets none (or cannot be read).

    `environment_files` maps each EnvironmentFile= path (without systemd's `-`) to the text the
    probe read from it."""
    try:
        files = parse_systemctl_cat(unit_cat)
    except ParseError:
        return None
    environment: dict[str, str] = {}
    env_paths: list[str] = []
    command: str | None = None
    for _path, text in files:  # the fragment, then each drop-in: later settings win
        for key, value in _service_assignments(text):
            if key == "Environment":
                environment.update(_assignments(value))
            elif key == "EnvironmentFile":
                env_paths = [*env_paths, value.lstrip("-")] if value else []
            elif key == "ExecStart":
                command = value or None  # an empty ExecStart= clears the ones before it
    for path in env_paths:  # systemd: the files' settings override Environment='s
        environment.update(assignments(environment_files.get(path) or ""))
    flag = _api_key_flag(command.lstrip(_EXEC_PREFIX), environment) if command else None
    return flag or environment.get(ENV_KEY) or None


def _service_assignments(text: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    section = ""
    for line in _logical_lines(text):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
        elif section == "Service" and "=" in stripped and stripped[0] not in "#;":
            key, _, value = stripped.partition("=")
            found.append((key.strip(), value.strip()))
    return found


def _assignments(value: str) -> dict[str, str]:
    try:
        words = shlex.split(value)
    except ValueError:
        return {}
    return {k: v for k, eq, v in (w.partition("=") for w in words) if eq}


def _api_key_flag(command: str, environment: dict[str, str]) -> str | None:
    """The first key `--api-key` gives on the command line (`--api-key K`, `--api-key=K`, or
    vLLM's underscore spelling); argparse's last occurrence wins."""
    try:
        words = expand_variables(shlex.split(command), environment)
    except ValueError:
        return None
    key = None
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag.replace("_", "-") != "--api-key":
            continue
        if eq:
            key = value
        elif i + 1 < len(words) and not words[i + 1].startswith("-"):
            key = words[i + 1]
    return key or None
