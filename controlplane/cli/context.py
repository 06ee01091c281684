"""What every command shares: the --json switch and the client, made when first needed (so
`--help` and shell completion work without a server or a token)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from . import config
from .client import Client

F = TypeVar("F", bound=Callable[..., Any])


class State:
    def __init__(self) -> None:
        self.json = False
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(config.load())
        return self._client


# One run of cpctl per process (`run` starts a fresh one): the state outlives Click's context,
# so that an error raised out of a command is still printed as --json asked.
_current = State()


def fresh_state() -> State:
    global _current
    _current = State()
    return _current


def state() -> State:
    return _current


def client() -> Client:
    return state().client


def wants_json() -> bool:
    return state().json


def _set_json(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value:
        state().json = True


def json_option(f: F) -> F:
    return click.option(
        "--json",
        is_flag=True,
        expose_value=False,
        callback=_set_json,
        help="Print the API's JSON unchanged (lists: a JSON array of their items).",
    )(f)
