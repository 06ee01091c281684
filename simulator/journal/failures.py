"""What a vLLM server writes when its start fails or it dies, per kind of failure."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from . import cli_failures, engine_failures, server_failures

if TYPE_CHECKING:
    from ..state import Machine, Run
    from ..vllm_cli import EngineArgs

_Lines = Callable[["Run", "EngineArgs", float], list[str]]

# Each failure kind (see simulator.state.engine_start) and the lines it leaves in the journal.
_BY_KIND: dict[str, _Lines] = {
    "help": cli_failures.help_exit,
    "usage": cli_failures.usage_error,
    "cli": cli_failures.cli_failure,
    "config": server_failures.bad_memory_utilization,
    "world_size": server_failures.world_too_large,
    "dp_world_size": server_failures.replicas_do_not_fit,
    "port_range": server_failures.port_out_of_range,
    "quantization": server_failures.quantization_mismatch,
    "missing_tokenizer": server_failures.missing_tokenizer,
    "port": server_failures.port_in_use,
    "missing_model": server_failures.missing_model,
    "oom": engine_failures.out_of_memory,
    "free_memory": engine_failures.not_enough_free_memory,
    "no_kv_cache": engine_failures.no_kv_cache,
}


def failure_lines(machine: Machine, run: Run, kind: str, at: float) -> list[str]:
    """The lines of a run that failed with `kind` at `at` (any other kind: a worker crash)."""
    engine = run.engine
    if kind == "exec" or engine is None:
        return []  # nothing ran: systemd alone reports it
    lines = _BY_KIND.get(kind, engine_failures.worker_crash)
    return lines(run, engine, machine.wall_of(at))
