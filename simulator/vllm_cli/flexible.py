"""What vLLM 0.32's FlexibleArgumentParser does to the words before argparse sees them
(vllm/utils/argparse_utils.py).

The steps run in vLLM's order (see the package's docstring): the model to the front, a
`--config` file's flags spliced in, flag names respelled, dotted flags folded into JSON.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import re
from collections.abc import Callable
from typing import Any

import yaml

from .arg_types import human_readable_int
from .engine_args import CliCrash, CliFailure

_UNDERSCORES = re.compile(r"(?<=--)[^\.]*")  # everything between the first -- and the first .
_MODEL = re.compile(r"^--model(=.+|$)")
_SERVED_NAME = re.compile(r"^--served[-_]model[-_]name(=.+|$)")
_CONFIG = re.compile(r"^--config(=.+|$)")
_MODEL_WARNING = (
    "With `vllm serve`, you should provide the model as a positional argument or in a "
    "config file instead of via the `--model` option. The `--model` option will be "
    "removed in a future version."
)


def flexible(
    args: list[str],
    read_file: Callable[[str], str | None] | None,
    has_option: Callable[[str], bool] = lambda option: False,
) -> tuple[list[str], str | None, tuple[str, ...]]:
    """FlexibleArgumentParser.parse_args up to handing the words to argparse.

    Returns the words argparse sees, the `--config` path (if any) and the warnings logged.
    `has_option` says whether the parser has an option string (a config file's `key: false`
    becomes `--no-key` when it does).
    """
    args, warnings = _model_first(args)
    _served_name_needs_the_model(args)
    args, config_file = _splice_config(args, read_file, has_option)
    processed: list[str] = []
    for i, arg in enumerate(args):
        processed += _respelled(arg, args[i + 1] if i + 1 < len(args) else None)
    return _fold_dotted(processed), config_file, warnings


def _model_first(args: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """The first `--model X` / `--model=X` becomes the positional model, with a warning."""
    model_idx = next((i for i, a in enumerate(args) if _MODEL.match(a)), None)
    if model_idx is None:
        return args, ()
    if args[model_idx] == "--model":
        if model_idx + 1 >= len(args):
            raise CliCrash(
                CliFailure(
                    "parse_args",
                    "model_tag = args[model_idx + 1]",
                    "IndexError: list index out of range",
                )
            )
        model_tag, rest = args[model_idx + 1], model_idx + 2
    else:
        model_tag, rest = args[model_idx].removeprefix("--model="), model_idx + 1
    return ["serve", model_tag, *args[1:model_idx], *args[rest:]], (_MODEL_WARNING,)


def _served_name_needs_the_model(args: list[str]) -> None:
    """vLLM 0.32 refuses `--served-model-name` before (without) the positional model."""
    if (
        len(args) > 1
        and args[1].startswith("-")
        and not any(_CONFIG.match(a) for a in args)
        and any(_SERVED_NAME.match(a) for a in args)
    ):
        raise CliCrash(
            CliFailure(
                "parse_args",
                "raise ValueError(",
                "ValueError: `model` should be provided as the first positional argument when "
                "using `vllm serve`. i.e. `vllm serve <model> --<arg> <value>`.",
            )
        )


def _splice_config(
    args: list[str],
    read_file: Callable[[str], str | None] | None,
    has_option: Callable[[str], bool],
) -> tuple[list[str], str | None]:
    """A `--config PATH` word pair: its YAML's flags go in after the model, when files are read."""
    if "--config" not in args:
        return args, None
    if args.count("--config") > 1:
        raise CliCrash(
            CliFailure(
                "_pull_args_from_config",
                'assert args.count("--config") <= 1, "More than one config file specified!"',
                "AssertionError: More than one config file specified!",
            )
        )
    index = args.index("--config")
    if index == len(args) - 1:
        raise CliCrash(
            CliFailure(
                "_pull_args_from_config",
                "raise ValueError(",
                "ValueError: No config file specified! "
                + " " * 29
                + "Please check your command-line arguments.",
            )
        )
    config_file = args[index + 1]
    if read_file is None:
        return args, config_file
    config_args = _config_args(config_file, read_file, has_option)
    model_in_cli = len(args) > 1 and not args[1].startswith("-")
    if not model_in_cli and "--model" not in config_args:
        raise CliCrash(
            CliFailure(
                "_pull_args_from_config",
                "raise ValueError(",
                "ValueError: No model specified! Please specify model either as a "
                "positional argument or in a config file.",
            )
        )
    if model_in_cli:
        return [args[0], args[1], *config_args, *args[2:index], *args[index + 2 :]], config_file
    return [args[0], *config_args, *args[1:index], *args[index + 2 :]], config_file


def _config_args(
    path: str, read_file: Callable[[str], str | None], has_option: Callable[[str], bool]
) -> list[str]:
    """FlexibleArgumentParser.load_config_file: a YAML mapping as flags (a nested mapping as
    one JSON argument)."""
    extension = path.split(".")[-1]
    if extension not in ("yaml", "yml"):
        raise CliCrash(
            CliFailure(
                "load_config_file",
                "raise ValueError(",
                f"ValueError: Config file must be of a yaml/yml type. {extension} supplied",
            )
        )
    logged = f"Unable to read the config file at {path}. Check path correctness"
    full = path if path.startswith("/") else "/" + path  # systemd starts units in /
    text = read_file(posixpath.normpath(full))
    if text is None:
        raise CliCrash(
            CliFailure(
                "load_config_file",
                "with open(file_path) as config_file:",
                f"FileNotFoundError: [Errno 2] No such file or directory: {path!r}",
                logged,
            )
        )
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        name = f"{type(exc).__module__}.{type(exc).__name__}"
        code = "config = yaml.safe_load(config_file)"
        raise CliCrash(CliFailure("load_config_file", code, f"{name}: {exc}", logged)) from exc
    if not isinstance(config, dict):
        raise CliCrash(
            CliFailure(
                "load_config_file",
                "for key, value in config.items():",
                f"AttributeError: '{type(config).__name__}' object has no attribute 'items'",
            )
        )
    args: list[str] = []
    for key, value in config.items():
        if isinstance(value, bool):
            if value:
                args.append(f"--{key}")
            elif has_option(f"--no-{key}"):
                args.append(f"--no-{key}")
        elif isinstance(value, list):
            if value:
                args.append(f"--{key}")
                args.extend(str(item) for item in value)
        elif isinstance(value, dict):
            args += [f"--{key}", json.dumps(value)]
        else:
            args += [f"--{key}", str(value)]
    return args


def _dashes(match: re.Match[str]) -> str:
    return match.group(0).replace("_", "-")


def _respelled(arg: str, following: str | None) -> list[str]:
    """`--flag_name` as `--flag-name` (up to a `.`), `-O3` and `-O=3` as
    `--optimization-level 3`, `-O` before a level 0-3 as `--optimization-level`, `--help=x` as
    `--help`. One word at a time, as vLLM 0.32 respells them."""
    if arg.startswith("--help="):
        return ["--help"]
    if arg.startswith("--"):
        if "=" in arg:
            key, value = arg.split("=", 1)
            return [f"{_UNDERSCORES.sub(_dashes, key, count=1)}={value}"]
        return [_UNDERSCORES.sub(_dashes, arg, count=1)]
    if arg.startswith("-O") and arg != "-O":
        return ["--optimization-level", arg[3:] if arg[2] == "=" else arg[2:]]
    if arg == "-O" and following in {"0", "1", "2", "3"}:
        return ["--optimization-level"]
    return [arg]


def _fold_dotted(processed: list[str]) -> list[str]:
    """Dotted arguments (--compilation-config.level 3) become one JSON argument per group."""
    delete: set[int] = set()
    dict_args: dict[str, dict[str, Any]] = {}
    for i, arg in enumerate(processed):
        if i in delete or (arg.startswith("--") and "." not in arg):
            continue
        if arg.startswith("-") and "." in arg:
            if "=" in arg:
                arg, value_str = arg.split("=", 1)
                if "." not in arg:
                    continue  # the dot was in the value
            else:
                if i + 1 >= len(processed):
                    raise CliCrash(
                        CliFailure(
                            "parse_args",
                            "value_str = processed_args[i + 1]",
                            "IndexError: list index out of range",
                        )
                    )
                value_str = processed[i + 1]
                delete.add(i + 1)
            if arg.endswith("+"):
                arg = arg[:-1]
                value_str = json.dumps(value_str.split(","))
            key, *keys = arg.split(".")
            parsed: Any
            try:
                parsed = json.loads(value_str)
            except ValueError:
                try:  # 0.32: human-readable numbers (`80g`) for dotted config fields
                    parsed = human_readable_int(value_str)
                except (ValueError, argparse.ArgumentTypeError):
                    parsed = value_str
            nested = _nested(keys, parsed)
            target = dict_args.setdefault(key, {})
            if isinstance(nested, dict):
                _merge(target, nested)
            delete.add(i)
    folded = [a for i, a in enumerate(processed) if i not in delete]
    for key, group in dict_args.items():
        folded += [key, json.dumps(group)]
    return folded


def _nested(keys: list[str], value: Any) -> Any:
    for key in reversed(keys):
        value = {key: value}
    return value


def _merge(original: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(original.get(key), dict):
            _merge(original[key], value)
        elif isinstance(value, list) and isinstance(original.get(key), list):
            original[key] += value
        else:
            original[key] = value
