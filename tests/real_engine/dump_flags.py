"""Every option of the pinned vLLM's `vllm serve`, from vLLM's own parser, as JSON.

Runs inside the real-engine venv: ``<env>/bin/python tests/real_engine/dump_flags.py``. It builds
the parser exactly as ``vllm serve`` does (vllm/entrypoints/cli/serve.py: a subparser passed
through vllm.entrypoints.launchers.cli_args.make_arg_parser, which adds model_tag, --headless,
--api-server-count, --config, --grpc, then FrontendArgs and AsyncEngineArgs) and prints, in
registration order, each option's strings, dest, action, type, choices, nargs, default, group
and help. Nothing here depends on the machine, so two runs print the same bytes.

``type_wraps`` names what a type function wraps (vLLM's ``optional_type(int)`` is a closure
over ``int``, a JSON dataclass flag's ``parse_dataclass`` takes its class as a default), so
that a table built from the capture (the simulator's) converts values as vLLM does; ``const``
is what a bare ``--flag`` stores when its value is optional (``nargs="?"``).
"""

from __future__ import annotations

import argparse
import enum
import functools
import json
import re
import sys
from typing import Any

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _name(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, functools.partial):
        return f"partial({_name(value.func)})"
    qualname = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if qualname:
        module = getattr(value, "__module__", "") or ""
        return qualname if module in ("builtins", "") else f"{module}.{qualname}"
    return _ADDRESS.sub("", repr(value))


def _plain(value: Any) -> Any:
    """JSON-ready and stable: enums by value, sets sorted, objects by their repr sans address."""
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((_plain(v) for v in value), key=repr)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return _ADDRESS.sub("", repr(value))


def serve_parser() -> argparse.ArgumentParser:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    root = FlexibleArgumentParser(prog="vllm")
    subparsers = root.add_subparsers(dest="subparser")
    return make_arg_parser(subparsers.add_parser("serve", usage="vllm serve [model_tag] [options]"))


def _wraps(function: Any) -> list[str]:
    """The callables `function` closes over or takes as defaults, depth first, by name."""
    found: list[str] = []
    inner = [cell.cell_contents for cell in getattr(function, "__closure__", None) or ()]
    inner += list(getattr(function, "__defaults__", None) or ())
    for value in inner:
        if callable(value):
            found.append(str(_name(value)))
            if not isinstance(value, type):
                found += _wraps(value)
    return found


def describe(parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    group_of = {
        id(action): group.title
        for group in parser._action_groups
        for action in group._group_actions
    }
    # FlexibleArgumentParser keeps `deprecated=True` actions in a set (argparse has no such
    # keyword before Python 3.13).
    deprecated = getattr(parser, "_deprecated", set())
    options = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        options.append(
            {
                "option_strings": list(action.option_strings),
                "dest": action.dest,
                "action": type(action).__name__,
                "type": _name(action.type),
                "type_wraps": _wraps(action.type) if action.type is not None else [],
                "choices": None if action.choices is None else _plain(list(action.choices)),
                "nargs": action.nargs,
                "default": _plain(action.default),
                "const": _plain(action.const),
                "required": action.required,
                "deprecated": action in deprecated or bool(getattr(action, "deprecated", False)),
                "group": group_of.get(id(action)),
                "help": None if action.help is None else " ".join(str(action.help).split()),
            }
        )
    return options


def main() -> int:
    # vLLM fills in help texts only when it sees "--help" in sys.argv when arg_utils is imported
    # (NEEDS_HELP), and leaves --model out when argv holds "serve" and "--help" both: an argument
    # that contains "--help" without being it gets the texts and the whole parser.
    sys.argv = [sys.argv[0], "--help-texts"]
    import vllm

    parser = serve_parser()
    options = describe(parser)
    document = {
        "vllm_version": vllm.__version__,
        "command": "vllm serve",
        "built_by": "vllm.entrypoints.launchers.cli_args.make_arg_parser",
        "count": len(options),
        "long_flags": sorted(s for o in options for s in o["option_strings"] if s.startswith("--")),
        "options": options,
    }
    json.dump(document, sys.stdout, indent=1, sort_keys=False, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
