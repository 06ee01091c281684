"""One script's nvidia-smi calls share the GPUs' readings until something may have moved them.

A probe asks nvidia-smi seven times within milliseconds; the simulator computes the eight GPUs'
readings once for them (Session.gpu_readings), and again after any program outside
shell.runner.READS_ONLY.
"""

from __future__ import annotations

import asyncio
import itertools

from simulator import shell
from simulator.state import Machine

POWER = "nvidia-smi --query-gpu=power.draw --format=csv,noheader,nounits"
MEMORY = "nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits"
MARK = "echo ---"


def _machine() -> Machine:
    # Every read of the wall clock is 7 s later: readings wobble with it, so two computations
    # of them differ where one computation shared does not.
    walls = itertools.count(1_790_000_000.0, 7.0)
    return Machine("gpu-01", clock=lambda: 1000.0, wall=lambda: next(walls), load_seconds=0.0)


def _halves(machine: Machine, script: str) -> tuple[str, str]:
    sink = shell.Sink()
    status = asyncio.run(shell.run(shell.Session(machine, sink=sink), script))
    stdout = "".join(sink.stdout)
    assert status == 0, ("".join(sink.stderr), stdout)
    first, second = stdout.split("---\n")
    return first, second


def test_one_script_reads_the_gpus_once_across_its_nvidia_smi_calls() -> None:
    machine = _machine()
    first, second = _halves(
        machine, f"{POWER}; date +%s >/dev/null; ps -e -o pid=,unit= >/dev/null; {MARK}; {POWER}"
    )
    assert first == second and len(first.splitlines()) == 8

    again, _ = _halves(machine, f"{POWER}; {MARK}; {POWER}")
    assert again != first  # another script reads them afresh: they did move


def test_a_program_that_may_change_them_makes_the_next_call_read_them_again() -> None:
    machine = _machine()
    before, after = _halves(
        machine, f"{MEMORY}; simctl fault foreign_gpu_process on >/dev/null; {MARK}; {MEMORY}"
    )
    grown = [int(b) - int(a) for a, b in zip(before.split(), after.split(), strict=True)]
    assert len(grown) == 8 and all(g > 0 for g in grown), grown


def test_sleep_makes_the_next_call_read_them_again() -> None:
    machine = _machine()
    first, second = _halves(machine, f"{POWER}; sleep 0; {MARK}; {POWER}")
    assert first != second
