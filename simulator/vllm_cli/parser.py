"""The `vllm` argparse parser with its `serve` subparser, built from the flag table."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from .arg_types import LOADS, dataclass_type, human_readable_int, optional_type, parse_type
from .flags import FLAGS, Flag
from .usage import MAIN_PROG, SERVE_USAGE


class UsageError(Exception):
    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message


class HelpExit(Exception):
    """--help: argparse prints the help and exits 0."""


class _Parser(argparse.ArgumentParser):
    """argparse, minus the printing and exiting: errors come back as exceptions."""

    def error(self, message: str) -> NoReturn:
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


# add_argument's keywords for each kind of flag in the table (see flags.py); the default is
# added for every kind.
_KINDS: dict[str, Callable[[Flag], dict[str, Any]]] = {
    "str": lambda flag: {"type": str},
    "ostr": lambda flag: {"type": optional_type(str)},
    "int": lambda flag: {"type": int},
    "oint": lambda flag: {"type": optional_type(int)},
    "hint": lambda flag: {"type": human_readable_int},
    "ohint": lambda flag: {"type": optional_type(human_readable_int)},
    "float": lambda flag: {"type": float},
    "ofloat": lambda flag: {"type": optional_type(float)},
    "bool": lambda flag: {"action": argparse.BooleanOptionalAction},
    "true": lambda flag: {"action": "store_true"},
    "json": lambda flag: {"type": parse_type(LOADS)},
    "loads": lambda flag: {"type": LOADS},
    "olist": lambda flag: {"type": optional_type(str), "nargs": "+"},
    "ilist": lambda flag: {"type": int, "nargs": "+"},
    "append": lambda flag: {"type": str, "action": "append"},
    "token": lambda flag: {"type": str, "nargs": "?", "const": True},
    "choice": lambda flag: {"type": str, "choices": list(flag.choices)},
    "ochoice": lambda flag: {
        "type": optional_type(str),
        "choices": [*sorted(flag.choices), "None"],
    },
    "ichoice": lambda flag: {"type": int, "choices": list(flag.choices)},
}


def _add(parser: argparse.ArgumentParser, flag: Flag) -> None:
    kw: dict[str, Any]
    if flag.kind.startswith("config:"):
        kw = {"type": dataclass_type(flag.kind.split(":", 1)[1])}
    else:
        kw = _KINDS[flag.kind](flag)
    parser.add_argument(*flag.names, default=flag.default, **kw)


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
