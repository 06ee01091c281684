"""The shell parses a command string once and keeps the parse for the next run of the same text.

What is cached must never stand in for what runs: each run still reads the host as it is now,
two scripts never share a parse, and the probe's output is byte for byte what the simulator
printed before the cache (samples/probe_rounds.json, written by the uncached shell; after an
intended change to what the tools print, rewrite it with
`python -m tests.simulator.test_shell_cache`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest
import time_machine

from simulator import catalog, shell
from simulator.shell.program import parse
from simulator.state import Machine

SAMPLES = Path(__file__).parent / "samples"
# hosts.probe_sections.probe_script, with integrity
PROBE = (SAMPLES / "probe_script.sh").read_text()
ROUNDS = SAMPLES / "probe_rounds.json"
UNIT = catalog.DEFAULT_UNIT
MONO, WALL = 1000.0, 1_790_000_000.0


def _run(machine: Machine, script: str, username: str = "root") -> tuple[str, str, int]:
    sink = shell.Sink()
    session = shell.Session(machine, username=username, sink=sink)
    status = asyncio.run(shell.run(session, script))
    return "".join(sink.stdout), "".join(sink.stderr), status


def _rounds() -> list[tuple[str, str, int]]:
    """Three probe rounds of one host on a stopped clock; the unit is stopped before the third."""
    clock = [MONO]
    with time_machine.travel(WALL, tick=False):
        machine = Machine("gpu-07", clock=lambda: clock[0], wall=lambda: WALL, load_seconds=0.2)
        clock[0] += 5
        first = _run(machine, PROBE)
        second = _run(machine, PROBE)
        assert _run(machine, f"systemctl stop --no-block {UNIT}")[2] == 0
        clock[0] += 5
        third = _run(machine, PROBE)
    return [first, second, third]


def test_probe_rounds_print_what_the_simulator_printed_before_the_cache() -> None:
    parse.cache_clear()
    expected = [tuple(r) for r in json.loads(ROUNDS.read_text())]
    assert _rounds() == expected


def test_a_round_shows_the_host_as_it_is_now_not_as_it_was_when_parsed() -> None:
    first, second, third = _rounds()
    assert "ActiveState=active" in first[0] and "ActiveState=active" in second[0]
    assert "ActiveState=inactive" in third[0]
    assert "vllm-kimi-k25.service\n" in first[0] and f" {UNIT}\n" not in third[0]
    assert "@@cp:end:health:" in third[0] and "@@cp:end:health:" + UNIT + ":7" in third[0]


def test_the_same_text_is_parsed_once() -> None:
    parse.cache_clear()
    machine = Machine("gpu-01")
    _run(machine, PROBE)
    _run(machine, PROBE)
    info = parse.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    assert parse(PROBE) is parse(PROBE)


def test_two_scripts_never_share_a_parse() -> None:
    machine = Machine("gpu-01")
    assert _run(machine, "echo one; echo $?") == ("one\n0\n", "", 0)
    assert _run(machine, "echo one; false; echo $?") == ("one\n1\n", "", 0)
    assert _run(machine, "echo one;  echo $?") == ("one\n0\n", "", 0)
    assert _run(machine, "echo 'one'; echo \"$HOME\"") == ("one\n/root\n", "", 0)
    assert _run(machine, "echo 'one'; echo \"$HOME\"", username="ops")[0] == "one\n/home/ops\n"


def test_syntax_errors_are_reported_on_every_run() -> None:
    machine = Machine("gpu-01")
    script = "echo before\necho a | cat\necho after"
    expected = ("before\n", "bash: line 2: pipelines are not supported by this simulated host\n", 2)
    assert _run(machine, script) == expected
    assert _run(machine, script) == expected
    late = "echo before\necho a &&"
    expected = ("before\n", "bash: -c: line 2: syntax error: unexpected end of file\n", 2)
    assert _run(machine, late) == expected
    assert _run(machine, late) == expected


def test_the_cached_parse_cannot_be_changed() -> None:
    program = parse("echo a $HOME > /dev/null")
    ((_connector, command),) = program.lines[0].commands
    with pytest.raises(dataclasses.FrozenInstanceError):
        command.words[0].quoted = True  # type: ignore[misc]
    with pytest.raises(AttributeError):
        command.words.append(command.words[0])  # type: ignore[attr-defined]
    assert isinstance(command.words[2].parts, tuple) and isinstance(program.lines, tuple)
    assert command.literal_argv is None and command.needs_env


if __name__ == "__main__":
    ROUNDS.write_text(json.dumps(_rounds(), indent=1) + "\n")


def test_the_command_log_keeps_the_newest_commands_only() -> None:
    """A host simulated for days must not grow without end: the log is bounded."""
    from simulator.state.machine import COMMAND_LOG_MAX, Machine

    machine = Machine("gpu-01")
    for i in range(COMMAND_LOG_MAX + 5):
        machine.command_log.append(f"echo {i}")
    assert len(machine.command_log) == COMMAND_LOG_MAX
    assert machine.command_log[-1] == f"echo {COMMAND_LOG_MAX + 4}"
