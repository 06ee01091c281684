"""The processes a server runs, as vLLM 0.11 names them, and the PIDs the simulator gives them."""

from __future__ import annotations

from .engine_args import EngineArgs


def worker_title(engine: EngineArgs, rank: int) -> str:
    """A GPU worker's name (its log prefix, and its process title after "VLLM::").

    `rank` counts across data-parallel replicas. With one GPU per replica there is no worker
    process: the EngineCore runs the model itself.
    """
    if engine.world_size == 1:
        return core_title(rank)
    dp_rank, local = divmod(rank, engine.world_size)
    pp_rank, tp_rank = divmod(local, engine.tensor_parallel_size)
    title = "Worker"
    if engine.data_parallel_size > 1:
        title += f"_DP{dp_rank}"
    if engine.pipeline_parallel_size > 1:
        title += f"_PP{pp_rank}"
    if engine.tensor_parallel_size > 1:
        title += f"_TP{tp_rank}"
    return title


def core_title(dp_rank: int) -> str:
    return f"EngineCore_DP{dp_rank}"


def worker_pid(engine: EngineArgs, main_pid: int, rank: int) -> int:
    """Workers follow the API server (rank 0 shares its PID: the simulator's convention)."""
    if engine.world_size == 1:
        return core_pid(engine, main_pid, rank)
    return main_pid + rank


def core_pid(engine: EngineArgs, main_pid: int, dp_rank: int) -> int:
    return main_pid + engine.gpus_needed + dp_rank
