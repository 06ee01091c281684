"""The `vllm` argparse parser with its `serve` subparser, built from the flag table (flags.py)."""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from .arg_types import converter
from .flags import FLAGS, Flag
from .usage import MAIN_PROG, SERVE_USAGE


class UsageError(Exception):
    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message


class HelpExit(Exception):
    """--help: argparse prints the help and exits 0."""


_TASK = re.compile(r"(^|\s)--task(=|\s|$)")
_TASK_HINT = (
    "\n\nHint: --task is not a vllm serve option. For embedding, reranking, or reward models, "
    "use --runner pooling. To adapt a generative model for pooling, also use --convert embed, "
    "--convert classify, or --convert reward."
)


class _Parser(argparse.ArgumentParser):
    """argparse, minus the printing and exiting: errors come back as exceptions."""

    def error(self, message: str) -> NoReturn:
        # FlexibleArgumentParser.error: vLLM 0.11's --task is gone, and vLLM says what instead.
        if message.startswith("unrecognized arguments:") and _TASK.search(message):
            message += _TASK_HINT
        raise UsageError(self.prog, message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise HelpExit()

    def _print_message(self, message: str, file: Any = None) -> None:
        return None


class _HelpAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS)

    def __call__(
        self, parser: Any, namespace: Any, values: Any, option_string: str | None = None
    ) -> None:
        raise HelpExit()


_ACTIONS: dict[str, Any] = {
    "bool": argparse.BooleanOptionalAction,
    "true": "store_true",
    "append": "append",
    "store": "store",
}
_SUPPRESS = "==SUPPRESS=="  # argparse.SUPPRESS, as the capture writes it


def _add(parser: argparse.ArgumentParser, flag: Flag) -> None:
    default = argparse.SUPPRESS if flag.default == _SUPPRESS else flag.default
    kw: dict[str, Any] = {"dest": flag.dest, "default": default, "action": _ACTIONS[flag.action]}
    if flag.action in ("store", "append"):
        kw["type"] = converter(flag.type, flag.optional)
        if flag.nargs is not None:
            kw["nargs"] = flag.nargs
        if flag.nargs == "?":
            kw["const"] = flag.const
    if flag.choices is not None:
        kw["choices"] = list(flag.choices)
    parser.add_argument(*flag.names, **kw)


@functools.cache
def parsers() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The `vllm` parser and its `serve` subparser, built once (parsing does not change them)."""
    main = _Parser(prog=MAIN_PROG, add_help=False)
    main.add_argument("-h", "--help", action=_HelpAction)
    main.add_argument("-v", "--version", action=_HelpAction)  # prints the version, exits 0
    sub = main.add_subparsers(dest="subparser", required=False, parser_class=_Parser)
    serve = sub.add_parser("serve", usage=SERVE_USAGE, add_help=False)
    serve.add_argument("-h", "--help", action=_HelpAction)
    serve.add_argument("model_tag", type=str, nargs="?")
    for flag in FLAGS:
        _add(serve, flag)
    return main, serve


@functools.cache
def defaults() -> tuple[tuple[str, Any], ...]:
    """Each destination's default, in registration order (vLLM's non-default args order)."""
    _main, serve = parsers()
    return tuple(vars(serve.parse_args([])).items())


def has_option(option: str) -> bool:
    """Whether `vllm serve` has this option string (exactly; no abbreviation)."""
    _main, serve = parsers()
    return option in serve._option_string_actions
