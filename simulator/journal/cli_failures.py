"""Failures of vLLM's command line handling: `--help`, usage errors, tracebacks before serving.

Nothing has started yet, so these lines carry no process prefix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..vllm_cli import MAIN_USAGE, SERVE_USAGE, help_lines
from . import log_format as fmt
from .log_format import Frame

if TYPE_CHECKING:
    from ..state import Run
    from ..vllm_cli import EngineArgs

_MAIN_FRAMES: tuple[Frame, ...] = (
    ("/opt/vllm/.venv/bin/vllm", 10, "<module>", "sys.exit(main())"),
    ("vllm/entrypoints/cli/main.py", 46, "main", "args = parser.parse_args()"),
)
# Where each function that can fail before the server starts sits, and who called it.
_CLI_WHERE: dict[str, tuple[Frame, ...]] = {
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


def help_exit(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    return help_lines()


def usage_error(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    usage = MAIN_USAGE if engine.usage_prog == "vllm" else SERVE_USAGE
    text = f"usage: {usage}\n{engine.usage_prog}: error: {engine.usage_error}"
    return text.split("\n")  # the main usage wraps, and a hint follows some errors


def cli_failure(run: Run, engine: EngineArgs, wall: float) -> list[str]:
    """A traceback from vLLM's command line handling: no process prefix, nothing started."""
    failure = engine.cli_failure
    assert failure is not None
    lines = []
    if failure.logged:
        lines.append(f"ERROR {fmt.stamp(wall)} [argparse_utils.py:443] {failure.logged}")
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
        *fmt.frames(*frames, here),
        *failure.exception.split("\n"),
    ]
