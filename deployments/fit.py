"""Will a model fit on a host's GPUs? Pure: a snapshot's state and a serving plan in.

The fit is computed for the parallelism that will actually run (tensor x pipeline x data
parallel, read from the unit the change writes), on the GPUs that parallelism will use, with
the memory that other processes hold there subtracted: the engine refuses to start when less
than its share of a GPU is free, and a foreign process holding memory is exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hosts.state import GpuState, HostState

from .unit_files.serving_plan import ServingPlan

MIB_PER_GIB = 1024
# vLLM's default for --gpu-memory-utilization (the pinned vLLM 0.32's parser says 0.92:
# tests/real_engine/captures/vllm-0.32.0-flags.json).
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92
# SGLang sizes --mem-fraction-static from the GPU's memory and the parallelism when it is not
# given; the fit check assumes 0.9 for it (and for a command line it cannot read).
DEFAULT_MEM_FRACTION_STATIC = 0.9


def default_memory_fraction(engine: str) -> float:
    """The share of each GPU the engine takes when its unit does not say."""
    return DEFAULT_GPU_MEMORY_UTILIZATION if engine == "vllm" else DEFAULT_MEM_FRACTION_STATIC


@dataclass(frozen=True)
class GpuFit:
    index: int
    total_gib: float
    foreign_gib: float  # held by processes of other units or sessions
    budget_gib: float  # the engine's share of this GPU
    need_gib: float
    foreign: tuple[str, ...] = ()  # "pid 1234 python3 (session-7.scope)"

    @property
    def free_gib(self) -> float:
        return self.total_gib - self.foreign_gib

    @property
    def startable(self) -> bool:
        """vLLM refuses to start unless its whole share is free when it starts."""
        return self.free_gib >= self.budget_gib

    @property
    def fits(self) -> bool:
        return self.startable and self.need_gib <= self.budget_gib

    @property
    def slack_gib(self) -> float:
        return min(self.free_gib, self.budget_gib) - self.need_gib


@dataclass(frozen=True)
class FitCheck:
    fits: bool
    weights_per_gpu_gib: float
    kv_reserve_gib: float
    budget_per_gpu_gib: float | None
    message: str
    gpus_needed: int = 1
    per_gpu: tuple[GpuFit, ...] = field(default_factory=tuple)


def model_fits(
    *,
    state: HostState,
    weights_gib: float,
    plan: ServingPlan,
    unit: str,
    kv_reserve_gib: float,
) -> FitCheck:
    """Weights split over tp x pp GPUs plus a KV-cache reserve must fit in each GPU's budget:
    the engine's share of the GPU (--gpu-memory-utilization), and no more than what processes
    outside `unit` leave free. Checked on each of the tp x pp x dp GPUs the engine will use."""
    needed = plan.gpus_needed
    per_gpu = weights_gib / max(1, plan.weight_shards)
    shape = _shape(plan)

    def refused(
        message: str, fits: tuple[GpuFit, ...] = (), budget: float | None = None
    ) -> FitCheck:
        return FitCheck(False, per_gpu, kv_reserve_gib, budget, message, needed, fits)

    sizes = (plan.tensor_parallel_size, plan.pipeline_parallel_size, plan.data_parallel_size)
    if min(sizes) < 1:
        return refused(f"{shape}: every parallel size must be at least 1")
    if len(state.gpus) < needed:
        return refused(f"{shape} needs {needed} GPUs; the snapshot shows {len(state.gpus)}")
    fraction = max(0.05, min(1.0, plan.memory_fraction or default_memory_fraction(plan.engine)))
    used = sorted(state.gpus, key=lambda g: g.index)[:needed]
    missing = [g.index for g in used if not g.memory_total_mib]
    if missing:
        return refused(f"the snapshot has no memory total for GPU {missing[0]}")
    fits = tuple(_gpu_fit(gpu, state, unit, fraction, per_gpu + kv_reserve_gib) for gpu in used)
    tight = min(fits, key=lambda f: f.slack_gib)
    holders = (
        f"; {tight.foreign_gib:.1f} GiB of GPU {tight.index} is held by {', '.join(tight.foreign)}"
        if tight.foreign_gib
        else ""
    )
    if not tight.startable:
        return refused(
            f"does not fit ({shape}): GPU {tight.index} has {tight.free_gib:.1f} GiB free, less "
            f"than the {tight.budget_gib:.1f} GiB ({fraction:.0%}) the engine takes at start"
            f"{holders}",
            fits,
            tight.budget_gib,
        )
    if not tight.fits:
        return refused(
            f"does not fit ({shape}): {per_gpu:.1f} GiB of weights per GPU + "
            f"{kv_reserve_gib:.1f} GiB KV cache reserve = {tight.need_gib:.1f} GiB > "
            f"{tight.budget_gib:.1f} GiB available on GPU {tight.index}{holders}",
            fits,
            tight.budget_gib,
        )
    return FitCheck(
        True, per_gpu, kv_reserve_gib, tight.budget_gib,
        f"fits ({shape}): {per_gpu:.1f} GiB weights + {kv_reserve_gib:.1f} GiB KV reserve "
        f"of {tight.budget_gib:.1f} GiB on the tightest GPU",
        needed, fits,
    )  # fmt: skip


def _gpu_fit(gpu: GpuState, state: HostState, unit: str, fraction: float, need: float) -> GpuFit:
    total = (gpu.memory_total_mib or 0) / MIB_PER_GIB
    apps = state.foreign_processes(unit).get(gpu.index, [])
    held = sum(a.used_memory_mib or 0 for a in apps) / MIB_PER_GIB
    holders = tuple(f"pid {a.pid} {a.process_name} ({a.unit or 'unknown unit'})" for a in apps)
    return GpuFit(gpu.index, total, held, total * fraction, need, holders)


def _shape(plan: ServingPlan) -> str:
    parts = [f"tensor-parallel {plan.tensor_parallel_size}"]
    if plan.pipeline_parallel_size > 1:
        parts.append(f"pipeline-parallel {plan.pipeline_parallel_size}")
    if plan.data_parallel_size > 1:
        parts.append(f"data-parallel {plan.data_parallel_size}")
    return " x ".join(parts)
