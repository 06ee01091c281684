"""argparse types for `vllm serve`'s flags, named as vLLM 0.32 names them (argparse prints the
name in "invalid <name> value"), converting and failing as vLLM's do (vllm/engine/arg_utils.py,
vllm/utils/argparse_utils.py)."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from typing import Any


def human_readable_int(value: str) -> int:
    """vLLM's type for token counts: `32k` (thousands), `32K` (1024s), or a plain number."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        decimal = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
        binary = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
        number, suffix = match.groups()
        if suffix in decimal:
            return int(float(number) * decimal[suffix])
        try:
            return int(number) * binary[suffix]
        except ValueError as exc:
            raise argparse.ArgumentTypeError(
                f"Decimals are not allowed with binary suffixes like {suffix}. "
                f"Did you mean to use {number}{suffix.lower()} instead?"
            ) from exc
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    """--max-model-len: a human-readable number, or -1 / `auto` (fit what the memory holds)."""
    value = value.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return human_readable_int(value)


class _Loads:
    """json.loads, printed as vLLM's error messages print it."""

    __name__ = "loads"

    def __call__(self, val: str) -> Any:
        return json.loads(val)

    def __repr__(self) -> str:
        return "<function loads at 0x7f3a9c2b5e40>"


LOADS = _Loads()


def parse_type(return_type: Callable[[str], Any]) -> Callable[[str], Any]:
    def _parse_type(val: str) -> Any:
        try:
            return return_type(val)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(
                f"Value {val} cannot be converted to {return_type}."
            ) from exc

    return _parse_type


def optional_type(return_type: Callable[[str], Any]) -> Callable[[str], Any]:
    """ "" and "None" mean None; anything else goes through parse_type, as in vLLM 0.32."""

    def _optional_type(val: str) -> Any:
        if val == "" or val == "None":
            return None
        return parse_type(return_type)(val)

    return _optional_type


def union_dict_and_str(val: str) -> Any:
    """A JSON object when the value looks like one, the text itself otherwise."""
    if not re.match(r"(?s)^\s*{.*}\s*$", val):
        return str(val)
    return optional_type(LOADS)(val)


def _expand_human_readable_numbers(val: str) -> str:
    """vLLM 0.32 reads `80m` as 80000000 in a JSON config, outside quoted strings."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")', val)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(
            r"\b\d+(?:\.\d+)?[kKmMgGtT]\b",
            lambda m: str(human_readable_int(m.group())),
            parts[i],
        )
    return "".join(parts)


def _pydantic_error(cls_name: str, detail: str, kind: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(
        f"1 validation error for {cls_name}\n  {detail}\n"
        f"    For further information visit https://errors.pydantic.dev/2.14/v/{kind}"
    )


def _json_error(val: str) -> str:
    """What pydantic's JSON parser says of text that is not JSON, for the common cases."""
    text = val.lstrip()
    if not text:
        where = "EOF while parsing a value at line 1 column 0"
    elif text[0] in "ntfNI":  # null, true, false, NaN, Infinity
        where = "expected ident at line 1 column 2"
    else:
        where = "expected value at line 1 column 1"
    return f"Invalid JSON: {where} [type=json_invalid, input_value={val!r}, input_type=str]"


def dataclass_type(cls_name: str) -> Callable[[str], Any]:
    """A JSON config (TypeAdapter(cls).validate_json in vLLM): an object of its fields. Which
    fields the class has is not modelled: any object is taken."""

    def parse_dataclass(val: str) -> Any:
        try:
            value = json.loads(_expand_human_readable_numbers(val))
        except ValueError as exc:
            raise _pydantic_error(cls_name, _json_error(val), "json_invalid") from exc
        if not isinstance(value, dict):
            raise _pydantic_error(
                cls_name,
                f"Input should be an object [type=dataclass_type, input_value={value!r}, "
                f"input_type={type(value).__name__}]",
                "dataclass_type",
            )
        return value

    return parse_dataclass


_lower = lambda s: s.lower().replace("-", "_")  # noqa: E731 - argparse names it <lambda>
_device_ids = lambda s: [  # noqa: E731
    int(part) if part.isdigit() else part for part in (p.strip() for p in s.split(","))
]

# The converters the flag table names (simulator/vllm_cli/flags.py).
CONVERTERS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "loads": LOADS,
    "json": parse_type(LOADS),
    "hint": human_readable_int,
    "hint_or_auto": human_readable_int_or_auto,
    "dict_or_str": union_dict_and_str,
    "lower": _lower,
    "device_ids": _device_ids,
}


def converter(kind: str, optional: bool = False) -> Callable[[str], Any] | None:
    """The argparse type for a table entry (None: argparse keeps the word as it is)."""
    if kind == "none":
        return None
    base = dataclass_type(kind.split(":", 1)[1]) if kind.startswith("config:") else CONVERTERS[kind]
    return optional_type(base) if optional else base
