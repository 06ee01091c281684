"""`ps -e -o pid=,unit=`: the unit of each process (hosts/parsers/processes.py)."""

from __future__ import annotations

import pytest

from hosts.parsers import (
    ParseError,
    parse_process_units,
)
from tests.hosts.parser_samples import (
    PS_UNITS,
)


def test_process_units() -> None:
    assert parse_process_units(PS_UNITS) == {
        1: "init.scope",
        2: None,
        812: "systemd-journald.service",
        2314567: "vllm-kimi-k25.service",
        2318001: "session-3.scope",
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n",
        'error: unknown user-defined format specifier "unit"\n',  # procps without systemd
        "ps: unrecognized option: o\nBusyBox v1.36.1 multi-call binary.\n",
        "    PID UNIT\n      1 init.scope\n",  # a header: the request was not `pid=,unit=`
        "  1 init.scope extra\n",
    ],
)
def test_process_units_unreadable(text: str) -> None:
    with pytest.raises(ParseError):
        parse_process_units(text)
