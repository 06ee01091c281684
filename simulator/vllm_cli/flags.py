"""The flag table: every option of `vllm serve` in the pinned vLLM (0.32.0), as data.

The table is `vllm-0.32.0-flags.json` beside this file, made from the capture of vLLM's own
parser (tests/real_engine/captures/vllm-0.32.0-flags.json, by
tests/simulator/test_vllm_flag_table.py, which fails when the two differ). Its order is vLLM's
registration order (the order argparse lists them in "ambiguous option: --x could match ..."
and the order of "non-default args"): make_arg_parser's own options (--headless,
--api-server-count, --config, --grpc), FrontendArgs, then the engine's config groups, then
AsyncEngineArgs'. Every option is listed, including the many the simulator ignores, so that
prefix abbreviations resolve (or clash) and values fail exactly as they would.

Each entry: its option strings (a BooleanOptionalAction's `--no-x` is added by argparse), dest,
action (store, bool = BooleanOptionalAction, true = store_true, append), and for store and append
its converter (arg_types.CONVERTERS, `config:<Class>` for a JSON dataclass, `none` for argparse's
own), whether vLLM wraps it in optional_type ("" and "None" mean None), nargs, const, choices and
default (a config object's as {"object_repr": ...}).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("vllm-0.32.0-flags.json")


@dataclass(frozen=True)
class Flag:
    names: tuple[str, ...]
    dest: str
    action: str  # store | bool | true | append
    type: str = "none"
    optional: bool = False
    nargs: int | str | None = None
    const: Any = None
    choices: tuple[Any, ...] | None = None
    default: Any = None


class ObjectDefault:
    """A config object's default, known by its repr (what vLLM logs of it): argparse leaves a
    non-string default alone, as it leaves vLLM's config object."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectDefault) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def _default(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"object_repr"}:
        return ObjectDefault(value["object_repr"])
    return value


def _flag(entry: dict[str, Any]) -> Flag:
    choices = entry.get("choices")
    return Flag(
        names=tuple(entry["names"]),
        dest=entry["dest"],
        action=entry["action"],
        type=entry.get("type", "none"),
        optional=bool(entry.get("optional")),
        nargs=entry.get("nargs"),
        const=entry.get("const"),
        choices=None if choices is None else tuple(choices),
        default=_default(entry.get("default")),
    )


_DOCUMENT: dict[str, Any] = json.loads(TABLE.read_text(encoding="utf-8"))
VLLM_VERSION: str = _DOCUMENT["vllm_version"]
FLAGS: tuple[Flag, ...] = tuple(_flag(entry) for entry in _DOCUMENT["options"])

LONG_FLAGS: tuple[str, ...] = tuple(
    name for flag in FLAGS for name in flag.names if name.startswith("--")
)
