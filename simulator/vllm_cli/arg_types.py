"""argparse types for `vllm serve`'s flags, named as vLLM names them (argparse prints the name)."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from typing import Any


def human_readable_int(value: str) -> int:
    """vLLM's type for --max-model-len and token counts: `32k`, `1M` or a plain number."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        decimal = {"k": 10**3, "m": 10**6, "g": 10**9}
        binary = {"K": 2**10, "M": 2**20, "G": 2**30}
        number, suffix = match.groups()
        if suffix in decimal:
            return int(float(number) * decimal[suffix])
        if suffix in binary:
            try:
                return int(number) * binary[suffix]
            except ValueError as exc:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with binary suffixes like {suffix}. "
                    f"Did you mean to use {number}{suffix.lower()} instead?"
                ) from exc
    return int(value)


def optional_type(return_type: Callable[[str], Any]) -> Callable[[str], Any]:
    def _optional_type(val: str) -> Any:
        if val == "" or val == "None":
            return None
        return return_type(val)

    return _optional_type


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


def dataclass_type(cls_name: str) -> Callable[[str], Any]:
    def parse_dataclass(val: str) -> Any:
        try:
            return json.loads(val)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(
                f"1 validation error for {cls_name}\n  Invalid JSON: expected value at line 1 "
                f"column 1 [type=json_invalid, input_value={val!r}, input_type=str]"
            ) from exc

    return parse_dataclass
