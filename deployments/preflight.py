"""Pre-flight checks on a snapshot: will the model fit, is the server idle. Pure functions."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MIB_PER_GIB = 1024
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default for --gpu-memory-utilization


@dataclass(frozen=True)
class FitCheck:
    fits: bool
    weights_per_gpu_gib: float
    kv_reserve_gib: float
    budget_per_gpu_gib: float | None
    message: str


def memory_utilization(extra_args: list[str]) -> float:
    for arg in extra_args:
        match = re.fullmatch(r"--gpu-memory-utilization=([0-9.]+)", arg)
        if match:
            try:
                return max(0.05, min(1.0, float(match.group(1))))
            except ValueError:
                break
    return DEFAULT_GPU_MEMORY_UTILIZATION


def model_fits(
    *,
    parsed: dict[str, Any],
    weights_gib: float,
    tensor_parallel_size: int,
    extra_args: list[str],
    kv_reserve_gib: float,
) -> FitCheck:
    """Weights split over TP GPUs plus a KV-cache reserve must fit in each GPU's budget
    (total memory x --gpu-memory-utilization) on the smallest GPU the snapshot saw."""
    gpus = parsed.get("gpus") or []
    per_gpu = weights_gib / max(1, tensor_parallel_size)
    totals = [g.get("memory_total_mib") for g in gpus if g.get("memory_total_mib")]
    if len(gpus) < tensor_parallel_size:
        return FitCheck(
            False, per_gpu, kv_reserve_gib, None,
            f"tensor-parallel size {tensor_parallel_size} needs {tensor_parallel_size} GPUs; "
            f"the snapshot shows {len(gpus)}",
        )  # fmt: skip
    if not totals:
        return FitCheck(
            False, per_gpu, kv_reserve_gib, None, "the snapshot has no GPU memory totals"
        )
    budget = min(totals) / MIB_PER_GIB * memory_utilization(extra_args)
    need = per_gpu + kv_reserve_gib
    if need > budget:
        return FitCheck(
            False, per_gpu, kv_reserve_gib, budget,
            f"does not fit: {per_gpu:.1f} GiB of weights per GPU + {kv_reserve_gib:.1f} GiB KV "
            f"cache reserve = {need:.1f} GiB > {budget:.1f} GiB available per GPU",
        )  # fmt: skip
    return FitCheck(
        True, per_gpu, kv_reserve_gib, budget,
        f"fits: {per_gpu:.1f} GiB weights + {kv_reserve_gib:.1f} GiB KV reserve "
        f"of {budget:.1f} GiB per GPU",
    )  # fmt: skip


def inflight_requests(parsed: dict[str, Any], unit: str) -> float | None:
    server = ((parsed.get("deployments") or {}).get(unit) or {}).get("server") or {}
    running, waiting = server.get("requests_running"), server.get("requests_waiting")
    if running is None and waiting is None:
        return None
    return float(running or 0) + float(waiting or 0)
