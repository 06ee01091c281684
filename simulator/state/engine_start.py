"""How a vLLM start ends, decided when its process spawns: loaded after a while, or failed.

The checks come in vLLM's order: the command line, binding the API socket, the engine config
(model, tokenizer, quantization, parallelism), then each GPU worker's free-memory check and the
load itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import catalog, journal
from ..vllm_cli import EngineArgs, parse_vllm_argv
from .gpus import ACTIVATION_MIB, CUDA_CONTEXT_MIB, foreign_usage, runs_usage
from .units import Run, Unit, UnitDefinition, visible_gpus

if TYPE_CHECKING:
    from .machine import Machine

BOOT_LOAD_SECONDS = 214.0  # how long the model took to load when the fleet's hosts booted

# How long after `systemctl start` each kind of failure surfaces, as a share of the load time.
_FAIL_DELAY = {
    "exec": 0.0,
    "help": 0.05,
    "usage": 0.1,
    "cli": 0.1,
    "config": 0.1,
    "port": 0.15,
    "port_range": 0.15,
    "world_size": 0.15,
    "quantization": 0.18,
    "missing_model": 0.2,
    "missing_tokenizer": 0.2,
    "dp_world_size": 0.25,
    "free_memory": 0.3,
    "no_kv_cache": 0.8,
    "oom": 0.5,
    "crash": 0.7,
}


def plan_engine(
    machine: Machine,
    unit: Unit,
    run: Run,
    engine: EngineArgs,
    definition: UnitDefinition,
    at: float,
    *,
    booted: bool,
) -> None:
    """Decide at spawn time how this start ends, as vLLM would find out while loading."""
    if engine.reads_files:  # a --config file or chat template: read now, not at load
        engine = parse_vllm_argv(run.argv, machine.read_file) or engine
        run.engine = engine
    machine.log_vllm(unit, run, at, journal.startup_lines(machine, run, engine))
    kind = _engine_failure(machine, unit, run, engine, definition)
    if kind is None:
        kind = _memory_failure(machine, run, engine)
    if kind is None and machine.fault_applies("crash_on_start", engine.model_path) and not booted:
        kind = "crash"
    if kind is not None:
        doom(machine, run, kind, at)
        return
    run.ready_at = at + (BOOT_LOAD_SECONDS if booted else machine.load_seconds)


def _engine_failure(
    machine: Machine, unit: Unit, run: Run, engine: EngineArgs, definition: UnitDefinition
) -> str | None:
    """Why the engine would stop before its workers touch a GPU (None: it gets that far)."""
    if engine.help_requested:
        return "help"
    if engine.usage_error is not None:
        return "usage"
    if engine.cli_failure is not None:
        return "cli"
    if not engine.headless and engine.uds is None and not 0 <= engine.port <= 65535:
        return "port_range"
    for other in machine.units.values():
        if other is unit or other.run is None or other.run.engine is None:
            continue
        if other.run.failure is None and engine.binds_clash(other.run.engine):
            return "port"
    if not 0 < engine.gpu_memory_utilization <= 1:
        return "config"
    count = machine.hardware.gpu_count
    run.visible = tuple(g for g in visible_gpus(run.environment, count) if 0 <= g < count)
    tp, pp, dp = (
        engine.tensor_parallel_size,
        engine.pipeline_parallel_size,
        engine.data_parallel_size,
    )
    if min(tp, pp, dp) < 1 or tp * pp > len(run.visible):
        return "world_size"
    model_path = machine.model_dir(engine.model_path)
    if model_path is None or model_path not in machine.disk:
        return "missing_model"
    tokenizer = engine.tokenizer or ""
    tokenizer_dir = machine.model_dir(tokenizer) if tokenizer else model_path
    if tokenizer_dir != model_path and (tokenizer_dir is None or tokenizer_dir not in machine.disk):
        return "missing_tokenizer"
    model = catalog.MODELS_BY_PATH.get(model_path)
    if engine.quantization and model and engine.quantization != model.quantization:
        return "quantization"
    if engine.gpus_needed > len(run.visible):
        return "dp_world_size"
    return None


def _memory_failure(machine: Machine, run: Run, engine: EngineArgs) -> str | None:
    """Each worker's free-memory check at startup, then whether weights and KV cache fit.

    Every data-parallel replica holds a full copy of the weights, split over its
    tensor-parallel x pipeline-parallel GPUs.
    """
    weights_gib = machine.disk[machine.model_dir(engine.model_path) or ""]
    run.gpus = run.visible[: engine.gpus_needed]
    total = machine.hardware.memory_mib
    run.gpu_total_mib = total
    run.budget_mib = int(engine.gpu_memory_utilization * total)
    run.weights_mib = weights_gib * 1024 / engine.world_size
    now = machine.clock()
    for gpu in run.gpus:
        spec = machine.gpus[gpu]
        used = runs_usage(machine, spec, now, exclude=run) + foreign_usage(machine, spec, now)
        free = total - spec.idle_mib - used
        if free < run.budget_mib:
            run.free_mib = free
            return "free_memory"
    if run.weights_mib > run.budget_mib:
        return "oom"
    if run.weights_mib + ACTIVATION_MIB + CUDA_CONTEXT_MIB > run.budget_mib:
        return "no_kv_cache"
    return None


def doom(machine: Machine, run: Run, kind: str, at: float) -> None:
    """The run will fail with `kind` once vLLM gets that far (some failures take a while)."""
    run.failure = kind
    run.fail_at = at + machine.load_seconds * _FAIL_DELAY.get(kind, 0.5)
    run.ready_at = None
