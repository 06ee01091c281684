"""JSON in and out of the state's dataclasses (hosts.state): plain dicts for storage without
asdict's deep copies, and one generic reader built from the dataclasses' type hints."""

from __future__ import annotations

import json
import operator
import types
from collections.abc import Callable
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

T = TypeVar("T")


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """`value` as json.loads(json.dumps(dataclasses.asdict(value))) returns it, without
    asdict's deep copies: every probe of every host goes through here (about 500 values)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    convert = _CONVERTERS.get(kind)
    if convert is None:
        convert = _CONVERTERS[kind] = _converter(kind)
    return convert(value)


_CONVERTERS: dict[type, Callable[[Any], Any]] = {}


def _converter(kind: type) -> Callable[[Any], Any]:
    """How `plain` converts a value of this type; made once per type. Scalars are tested
    inline, not by a call each: most of a state's values are scalars."""
    if kind is list or kind is tuple:
        return lambda v: [x if type(x) in _SCALARS else plain(x) for x in v]
    if kind is dict:
        return lambda v: {
            k if type(k) is str else _json_key(k): x if type(x) in _SCALARS else plain(x)
            for k, x in v.items()
        }
    if is_dataclass(kind):
        names = _field_names(kind)
        values = operator.attrgetter(*names) if len(names) > 1 else None
        if values is None:  # attrgetter of one name gives the value, not a tuple
            return lambda v: {name: plain(getattr(v, name)) for name in names}
        return lambda v: dict(
            zip(names, [x if type(x) in _SCALARS else plain(x) for x in values(v)], strict=True)
        )
    return lambda v: json.loads(json.dumps(v))  # anything else exactly as JSON would have it


def _json_key(key: Any) -> str:
    return next(iter(json.loads(json.dumps({key: None}))))


# --- reading stored JSON back ----------------------------------------------------------------
# One generic reader for every dataclass here, built from its type hints: a snapshot stored by
# an older release lacks newer fields (their defaults apply), and a value of the wrong shape is
# dropped (a list item) or replaced by the field's default, never an exception.


class _Unreadable(Exception):
    """A stored value that cannot be the type asked for."""


_READERS: dict[Any, Callable[[Any], Any]] = {}


def read_json(cls: type[T], data: object) -> T:
    """An instance of the dataclass `cls` from its stored JSON form; raises ValueError when
    `data` cannot be one (not a dict, or a field without a default is missing or unreadable)."""
    try:
        value: T = _reader(cls)(data)
    except _Unreadable as exc:
        raise ValueError(f"not a stored {cls.__name__}: {exc}") from None
    return value


def _reader(tp: Any) -> Callable[[Any], Any]:
    found = _READERS.get(tp)
    if found is None:
        found = _READERS[tp] = _build_reader(tp)
    return found


def _build_reader(tp: Any) -> Callable[[Any], Any]:
    if is_dataclass(tp) and isinstance(tp, type):
        return _dataclass_reader(tp)
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        options = [_reader(a) for a in args if a is not type(None)]
        nullable = type(None) in args
        return lambda v: None if v is None and nullable else _first_reading(options, v)
    if origin is list:
        item = _reader(args[0])
        return lambda v: _read_items(item, _expect(v, list))
    if origin is dict:
        value_reader = _reader(args[1])
        return lambda v: _read_values(value_reader, _expect(v, dict))
    if tp is float:  # JSON writes 300.0 as 300
        return lambda v: v if type(v) in (float, int) else _fail(v, tp)
    if tp in (str, int, bool):
        return lambda v: v if type(v) is tp else _fail(v, tp)
    if tp is Any:
        return lambda v: v
    raise TypeError(f"no JSON reader for {tp!r}")


def _dataclass_reader(cls: type) -> Callable[[Any], Any]:
    hints = get_type_hints(cls)
    plan = [
        (
            f.name,
            _reader(hints[f.name]),
            f.default is not MISSING or f.default_factory is not MISSING,
        )
        for f in fields(cls)
    ]

    def read(data: Any) -> Any:
        data = _expect(data, dict)
        kwargs = {}
        for name, read_field, has_default in plan:
            if name in data:
                try:
                    kwargs[name] = read_field(data[name])
                    continue
                except _Unreadable:
                    pass
            if not has_default:
                raise _Unreadable(f"{cls.__name__}.{name} missing or unreadable")
        return cls(**kwargs)

    return read


def _first_reading(options: list[Callable[[Any], Any]], value: Any) -> Any:
    for option in options:
        try:
            return option(value)
        except _Unreadable:
            continue
    raise _Unreadable(f"unexpected {type(value).__name__}")


def _read_items(read: Callable[[Any], Any], values: list[Any]) -> list[Any]:
    items = []
    for value in values:
        try:
            items.append(read(value))
        except _Unreadable:
            continue  # one unreadable entry does not lose the others
    return items


def _read_values(read: Callable[[Any], Any], values: dict[Any, Any]) -> dict[str, Any]:
    out = {}
    for key, value in values.items():
        try:
            out[key] = read(value)
        except _Unreadable:
            continue
    return out


def _expect(value: Any, kind: type) -> Any:
    return value if type(value) is kind else _fail(value, kind)


def _fail(value: Any, kind: Any) -> Any:
    raise _Unreadable(f"{type(value).__name__} where {getattr(kind, '__name__', kind)} belongs")
