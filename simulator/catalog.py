"""The models lying on every simulated host's disk, and the unit the hosts boot with.

One constant serves both the simulator (what fits, what a path weighs) and `simfleet
--register` (the ModelArtifact rows), so the catalog the control plane offers is the one the
hosts can actually load.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CatalogModel:
    name: str  # ModelArtifact.name
    variant: str  # ModelArtifact.variant (a deployments.choices.Quantization value)
    weights_gib: float
    path: str
    served_name: str
    architecture: str
    max_model_len: int  # the model's native context, used when --max-model-len is absent

    @property
    def quantization(self) -> str:
        """The quantization method vLLM reads from the checkpoint's config.json."""
        return QUANTIZATION_BY_VARIANT.get(self.variant, self.variant.lower())


# A checkpoint's variant -> the method vLLM detects; `--quantization` must name the same one.
QUANTIZATION_BY_VARIANT = {"NVFP4": "modelopt_fp4", "INT4": "compressed-tensors", "FP8": "fp8"}


CATALOG: tuple[CatalogModel, ...] = (
    CatalogModel(
        name="moonshotai/Kimi-K2.5",
        variant="NVFP4",
        weights_gib=595,
        path="/models/moonshotai/Kimi-K2.5-NVFP4",
        served_name="kimi-k2.5",
        architecture="KimiK25ForConditionalGeneration",
        max_model_len=262144,
    ),
    CatalogModel(
        name="moonshotai/Kimi-K2.5",
        variant="INT4",
        weights_gib=555,
        path="/models/moonshotai/Kimi-K2.5-INT4",
        served_name="kimi-k2.5",
        architecture="KimiK25ForConditionalGeneration",
        max_model_len=262144,
    ),
    CatalogModel(
        name="moonshotai/Kimi-K2.5",
        variant="FP8",
        weights_gib=1030,
        path="/models/moonshotai/Kimi-K2.5-FP8",
        served_name="kimi-k2.5",
        architecture="KimiK25ForConditionalGeneration",
        max_model_len=262144,
    ),
    CatalogModel(
        name="Qwen/Qwen3-235B-A22B",
        variant="FP8",
        weights_gib=220,
        path="/models/Qwen/Qwen3-235B-A22B-FP8",
        served_name="qwen3-235b",
        architecture="Qwen3MoeForCausalLM",
        max_model_len=40960,
    ),
    CatalogModel(
        name="deepseek-ai/DeepSeek-V3.2",
        variant="FP8",
        weights_gib=690,
        path="/models/deepseek-ai/DeepSeek-V3.2-FP8",
        served_name="deepseek-v3.2",
        architecture="DeepseekV32ForCausalLM",
        max_model_len=163840,
    ),
)

MODELS_BY_PATH: dict[str, CatalogModel] = {m.path: m for m in CATALOG}

# What every host has on disk at boot: path -> weights GiB. Tests add and remove paths per host.
DEFAULT_DISK: dict[str, float] = {m.path: m.weights_gib for m in CATALOG}

DEFAULT_MODEL = CATALOG[0]
DEFAULT_UNIT = "vllm-kimi-k25.service"
DEFAULT_PORT = 8000
DEFAULT_TP = 8
UNIT_DIR = "/etc/systemd/system"
VLLM_BINARY = "/opt/vllm/.venv/bin/vllm"
VLLM_VERSION = "0.11.2"


def unit_file_text(
    *,
    model_path: str = DEFAULT_MODEL.path,
    served_name: str = DEFAULT_MODEL.served_name,
    tensor_parallel_size: int = DEFAULT_TP,
    max_model_len: int = DEFAULT_MODEL.max_model_len,
    port: int = DEFAULT_PORT,
    revision: int = 1,
    extra_args: tuple[str, ...] = (),
    binary: str = VLLM_BINARY,
    host: str | None = None,
) -> str:
    """A unit file in the exact shape the control plane writes, for the boot state and tests."""
    args = [
        binary,
        "serve",
        model_path,
        "--served-model-name",
        served_name,
        "--tensor-parallel-size",
        str(tensor_parallel_size),
        "--max-model-len",
        str(max_model_len),
        "--port",
        str(port),
        *(("--host", host) if host is not None else ()),
        *extra_args,
    ]
    return (
        "[Unit]\n"
        f"Description=vLLM server {served_name} (controlplane revision {revision})\n"
        "After=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"ExecStart={' '.join(args)}\n"
        "Restart=no\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )
