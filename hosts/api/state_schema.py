"""The OpenAPI schema of a snapshot's `parsed` state, written from `hosts.state.HostState`'s
type hints (the same hints its JSON is read back by), so the API's description cannot drift
from what a probe stores."""

from __future__ import annotations

import types
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from typing import Any, Union, get_args, get_origin, get_type_hints

from ..state import HostState

_SCALARS: dict[Any, dict[str, str]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
}


def type_schema(tp: Any) -> dict[str, Any]:
    """The OpenAPI 3.0 schema of a value of type `tp` as `hosts.state` writes it to JSON."""
    if is_dataclass(tp) and isinstance(tp, type):
        return dataclass_schema(tp)
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        options = [type_schema(a) for a in args if a is not type(None)]
        schema = options[0] if len(options) == 1 else {"oneOf": options}
        return {**schema, "nullable": True} if type(None) in args else schema
    if origin in (list, tuple):
        return {"type": "array", "items": type_schema(args[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": type_schema(args[1])}
    if tp in _SCALARS:
        return dict(_SCALARS[tp])
    if tp is Any:
        return {}
    raise TypeError(f"no schema for {tp!r}")


@cache
def dataclass_schema(cls: type) -> dict[str, Any]:
    hints = get_type_hints(cls)
    properties = {f.name: type_schema(hints[f.name]) for f in fields(cls)}
    required = [
        f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING
    ]
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}("):
        schema["description"] = " ".join(cls.__doc__.split())
    if required:
        schema["required"] = required
    return schema


def host_state_schema() -> dict[str, Any]:
    return dataclass_schema(HostState)
