"""How fast a simulated host serves: the time of one engine step, per model and parallelism.

The simulated hosts are 8 x RTX PRO 6000 Blackwell (96 GiB GDDR7, 1.79 TB/s each) joined by
PCIe only, no NVLink. vLLM runs continuous batching: every engine step computes one token for
each running sequence plus a chunk of pending prompt tokens (`simulator.scheduler` decides which);
this module says how long such a step takes. Everything is in simulated seconds. A host of
another hardware profile (simulator.state.hardware) runs the same formula with its own memory
bandwidth and interconnect (NVLink on HGX boards), uncalibrated.

The formula, for a step computing T tokens (decode tokens plus prompt tokens) on tp GPUs::

    step(T) = overhead + max(memory(T), flops(T)) + allreduce(T)

    memory(T)    = (W * ((1 - r) + r * experts(T)) / tp + kv_read) / (bandwidth * efficiency)
    experts(T)   = 1 - (1 - k/E) ** (1 + (T - 1) / overlap)
    flops(T)     = (2 * active_params * T + attention_pair_flops * pairs) / tp / gpu_flops
    allreduce(T) = 2 * layers * cost * (latency + T * hidden * 2 B * 2(tp-1)/tp / bus_bandwidth)

with the link's latency 32.5 us and bus bandwidth 40 GB/s over PCIe (`INTERCONNECTS`).

- W is the checkpoint's weight bytes, r the share of it in routed experts. A decode step reads
  every dense weight and the experts its tokens were routed to: one token touches k of E
  experts, a batch more, saturating towards all of them. Tokens of one batch share experts
  (`overlap`): 64 concurrent requests touch about as many experts as a dozen independent tokens
  would. That saturation is why aggregate throughput grows much slower than the batch.
- kv_read is the KV cache the decode tokens attend over (their contexts), per GPU: split over
  the tensor-parallel ranks for GQA models, replicated on every rank for MLA (Kimi, DeepSeek).
- Two all-reduces per layer (after attention and after the MoE), each a fixed latency plus its
  bytes over the link. `cost` is the model build's collective path relative to vLLM's custom
  all-reduce over PCIe peer-to-peer (1.0).
- `overhead` is the per-step floor: scheduling, sampling, and the launch latency of a few
  thousand small kernels (CUDA graphs bound it; `--enforce-eager` multiplies it).

Prompt processing (TTFT) uses the same step: a 128-token prompt is one step of T=128, a batch
of 64 such prompts arriving together is one step of 8192 tokens (the scheduler's token budget),
so TTFT grows with prompt length, with concurrency and with queueing behind other prompts.

Calibration (what engineers measured on 8 x RTX PRO 6000 over PCIe, tp=8), fitted with
`simulator.scheduler.estimate` on the reference benchmark: C concurrent streams, one request
each, 128-token prompts, 256 output tokens, output throughput as `vllm bench serve` computes it
(all output tokens over the benchmark's duration, TTFT included):

- Kimi-K2.5 INT4: 82 tok/s for one stream, 2,200 for 64 (measured). Fitted: step overhead
  3.1 ms, decode kernels at 56 % of the memory bandwidth, routing overlap 12.
- Kimi-K2.5 NVFP4: 45 and 1,100 (measured), all-reduce 65-70 % of a decode step (measured).
  Same kernels and overlap; its collectives cost 3.65x the custom all-reduce's, which gives
  67 % of the step, and the overhead 2.2 ms.
- MiniMax-M2.5 FP8: 65 and 1,700, placed between the two as engineers expect, not measured:
  block-scaled FP8 MoE kernels at 14 % of the bandwidth, overhead 2.9 ms.

Why the NVFP4 build's collectives cost more (which all-reduce path it ends up on) is not
modelled, only how much; nor why the FP8 MoE kernels are slow on this GPU. The other catalog
models share the FP8 parameters, uncalibrated. Models without parameters here (a test's own
path) get a generic dense model of their disk size. Pipeline and data parallelism are not
modelled (tp only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from . import catalog

GIB = 1024**3
MEMORY_BANDWIDTH = 1.792e12  # bytes/s of one RTX PRO 6000 Blackwell (GDDR7)
HOST_INTERCONNECT = "pcie"  # what the default hardware profile has between its GPUs
EAGER_OVERHEAD_FACTOR = 2.5  # --enforce-eager: no CUDA graphs, every kernel launched by Python
# Block-scaled FP8 MoE kernels on this GPU reach a small share of its bandwidth (assumed, to
# place MiniMax-M2.5 FP8 between the two Kimi builds as engineers expect).
FP8_MOE_EFFICIENCY = 0.136


@dataclass(frozen=True)
class Link:
    """What one all-reduce over the GPUs' interconnect costs (8 GPUs, vLLM's custom path)."""

    latency_s: float
    bus_bandwidth: float  # bytes/s, NCCL's "bus bandwidth" convention


INTERCONNECTS = {
    "pcie": Link(latency_s=32.5e-6, bus_bandwidth=40e9),
    "nvlink": Link(latency_s=8e-6, bus_bandwidth=350e9),
}


@dataclass(frozen=True)
class ModelPerf:
    """One checkpoint's shape and how well this GPU runs its kernels (see the module doc)."""

    label: str
    weights_gib: float
    layers: int
    hidden: int
    active_params: float  # parameters computed per token
    routed_share: float = 0.0  # r: share of weight bytes in routed experts (0: dense)
    experts: int = 1  # E
    experts_per_token: int = 1  # k
    overlap: float = 1.0  # how many tokens of a batch route like one independent token
    kv_bytes_per_token: int = 0  # KV cache bytes per token, all layers, all KV heads
    kv_heads: int = 1  # ranks share the KV heads; MLA has one latent "head", replicated
    attention_pair_flops: float = 0.0  # flops per (query token, context token), all layers
    gpu_flops: float = 150e12  # effective FLOP/s of one GPU on this build's GEMMs
    memory_efficiency: float = 0.7  # share of MEMORY_BANDWIDTH its decode kernels reach
    allreduce_cost: float = 1.0  # this build's collectives relative to the custom all-reduce
    overhead_s: float = 4e-3  # per-step floor


@dataclass(frozen=True)
class StepCost:
    """One engine step's time and its parts, in simulated seconds."""

    memory_s: float
    flops_s: float
    allreduce_s: float
    overhead_s: float

    @property
    def seconds(self) -> float:
        return self.overhead_s + max(self.memory_s, self.flops_s) + self.allreduce_s


_KIMI = ModelPerf(
    label="Kimi-K2.5",
    weights_gib=555,
    layers=61,
    hidden=7168,
    active_params=32e9,
    routed_share=0.953,
    experts=384,
    experts_per_token=8,
    overlap=12.0,
    kv_bytes_per_token=61 * 576 * 2,  # MLA: a 512+64 latent per layer, bf16
    kv_heads=1,
    attention_pair_flops=61 * 2 * 64 * (192 + 128),
    memory_efficiency=0.564,
)

# Keyed by model path: the checkpoint decides the kernels, hence the speed.
PROFILES: dict[str, ModelPerf] = {
    "/models/moonshotai/Kimi-K2.5-INT4": replace(
        _KIMI, label="Kimi-K2.5 INT4", gpu_flops=175e12, overhead_s=3.12e-3
    ),
    "/models/moonshotai/Kimi-K2.5-NVFP4": replace(
        _KIMI,
        label="Kimi-K2.5 NVFP4",
        weights_gib=595,
        routed_share=0.956,
        gpu_flops=300e12,
        allreduce_cost=3.65,
        overhead_s=2.2e-3,
    ),
    "/models/moonshotai/Kimi-K2.5-FP8": replace(
        _KIMI,
        label="Kimi-K2.5 FP8",
        weights_gib=1030,
        routed_share=0.975,
        gpu_flops=250e12,
        memory_efficiency=FP8_MOE_EFFICIENCY,
    ),
    "/models/MiniMaxAI/MiniMax-M2.5-FP8": ModelPerf(
        label="MiniMax-M2.5 FP8",
        weights_gib=214,
        layers=62,
        hidden=3072,
        active_params=10e9,
        routed_share=0.96,
        experts=256,
        experts_per_token=8,
        overlap=12.0,
        kv_bytes_per_token=62 * 8 * 128 * 2 * 2,  # GQA: 8 KV heads of 128, K and V, bf16
        kv_heads=8,
        attention_pair_flops=62 * 2 * 48 * 256,
        gpu_flops=250e12,
        memory_efficiency=FP8_MOE_EFFICIENCY,
        overhead_s=2.92e-3,
    ),
    "/models/Qwen/Qwen3-235B-A22B-FP8": ModelPerf(
        label="Qwen3-235B-A22B FP8",
        weights_gib=220,
        layers=94,
        hidden=4096,
        active_params=22e9,
        routed_share=0.966,
        experts=128,
        experts_per_token=8,
        overlap=12.0,
        kv_bytes_per_token=94 * 4 * 128 * 2 * 2,
        kv_heads=4,
        attention_pair_flops=94 * 2 * 64 * 256,
        gpu_flops=250e12,
        memory_efficiency=FP8_MOE_EFFICIENCY,
        overhead_s=2.92e-3,
    ),
    "/models/deepseek-ai/DeepSeek-V3.2-FP8": replace(
        _KIMI,
        label="DeepSeek-V3.2 FP8",
        weights_gib=690,
        experts=256,
        active_params=37e9,
        routed_share=0.975,
        attention_pair_flops=61 * 2 * 128 * (192 + 128),
        gpu_flops=250e12,
        memory_efficiency=FP8_MOE_EFFICIENCY,
    ),
}


def generic_profile(weights_gib: float) -> ModelPerf:
    """A dense model of this size: what a model without its own parameters gets."""
    params = weights_gib * GIB / 2  # bf16
    return ModelPerf(
        label=f"dense {weights_gib:g} GiB",
        weights_gib=weights_gib,
        layers=80,
        hidden=8192,
        active_params=params,
        kv_bytes_per_token=80 * 8 * 128 * 2 * 2,
        kv_heads=8,
        attention_pair_flops=80 * 2 * 64 * 256,
    )


def profile_for(model_path: str, weights_gib: float | None = None) -> ModelPerf:
    """The parameters of the checkpoint at `model_path` (generic when unknown)."""
    path = model_path.rstrip("/")
    known = PROFILES.get(path)
    if known is not None:
        return known
    if weights_gib is None:
        model = catalog.MODELS_BY_PATH.get(path)
        weights_gib = model.weights_gib if model else 16.0
    return generic_profile(weights_gib)


def expert_share(model: ModelPerf, tokens: int) -> float:
    """The share of routed experts a step of `tokens` tokens reads (the saturation curve)."""
    if model.routed_share <= 0 or tokens <= 0:
        return 0.0
    independent = 1 + (tokens - 1) / model.overlap
    return 1 - (1 - model.experts_per_token / model.experts) ** independent


def step_cost(
    model: ModelPerf,
    *,
    tp: int,
    interconnect: str = HOST_INTERCONNECT,
    tokens: int,
    kv_tokens: int = 0,
    attention_pairs: float = 0.0,
    eager: bool = False,
    bandwidth: float = MEMORY_BANDWIDTH,
) -> StepCost:
    """One engine step computing `tokens` tokens whose decode part attends `kv_tokens`.

    `attention_pairs` counts the (query, key) pairs of the prompt chunks in the step;
    `bandwidth` is one GPU's memory bandwidth (another board than the calibrated one keeps the
    build's kernel efficiencies: uncalibrated).
    """
    tp = max(1, tp)
    weights = model.weights_gib * GIB
    read = weights * ((1 - model.routed_share) + model.routed_share * expert_share(model, tokens))
    kv = kv_tokens * model.kv_bytes_per_token / min(tp, model.kv_heads)
    memory = (read / tp + kv) / (bandwidth * model.memory_efficiency)
    flops = (2 * model.active_params * tokens + model.attention_pair_flops * attention_pairs) / (
        tp * model.gpu_flops
    )
    allreduce = 0.0
    if tp > 1:
        link = INTERCONNECTS[interconnect]
        volume = tokens * model.hidden * 2 * 2 * (tp - 1) / tp
        per_collective = (link.latency_s + volume / link.bus_bandwidth) * model.allreduce_cost
        allreduce = 2 * model.layers * per_collective
    overhead = model.overhead_s * (EAGER_OVERHEAD_FACTOR if eager else 1.0)
    return StepCost(memory, flops, allreduce, overhead)


def decode_seconds(
    model: ModelPerf, *, tp: int, batch: int, context: int, interconnect: str = HOST_INTERCONNECT
) -> float:
    """One decode step of `batch` sequences of `context` tokens each: the time per token."""
    return step_cost(
        model, tp=tp, interconnect=interconnect, tokens=batch, kv_tokens=batch * context
    ).seconds


def prefill_seconds(
    model: ModelPerf, *, tp: int, prompt_tokens: int, interconnect: str = HOST_INTERCONNECT
) -> float:
    """One prompt processed alone in one step: the least its TTFT can be."""
    return step_cost(
        model,
        tp=tp,
        interconnect=interconnect,
        tokens=prompt_tokens,
        attention_pairs=prompt_tokens * prompt_tokens / 2,
    ).seconds


def allreduce_share(model: ModelPerf, *, tp: int, batch: int, context: int) -> float:
    """The share of a decode step spent in all-reduce (what engineers profile)."""
    cost = step_cost(model, tp=tp, tokens=batch, kv_tokens=batch * context)
    return cost.allreduce_s / cost.seconds if cost.seconds > 0 else math.nan
