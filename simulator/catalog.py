"""The models lying on every simulated host's disk, and the unit the hosts boot with.

One constant serves both the simulator (what fits, what a path weighs) and `simfleet
--register` (the ModelArtifact rows), so the catalog the control plane offers is the one the
hosts can actually load.
"""

from __future__ import annotations

import hashlib
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
    repo_id: str | None = None  # the Hugging Face repository vLLM also accepts as the model

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
        repo_id="nvidia/Kimi-K2.5-NVFP4",
    ),
    CatalogModel(
        name="moonshotai/Kimi-K2.5",
        variant="INT4",
        weights_gib=555,
        path="/models/moonshotai/Kimi-K2.5-INT4",
        served_name="kimi-k2.5",
        architecture="KimiK25ForConditionalGeneration",
        max_model_len=262144,
        repo_id="moonshotai/Kimi-K2.5",
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
        repo_id="Qwen/Qwen3-235B-A22B-FP8",
    ),
    CatalogModel(
        name="deepseek-ai/DeepSeek-V3.2",
        variant="FP8",
        weights_gib=690,
        path="/models/deepseek-ai/DeepSeek-V3.2-FP8",
        served_name="deepseek-v3.2",
        architecture="DeepseekV32ForCausalLM",
        max_model_len=163840,
        repo_id="deepseek-ai/DeepSeek-V3.2",
    ),
    CatalogModel(
        name="MiniMaxAI/MiniMax-M2.5",
        variant="FP8",
        weights_gib=214,  # ~230 GB
        path="/models/MiniMaxAI/MiniMax-M2.5-FP8",
        served_name="minimax-m2.5",
        architecture="MiniMaxM2ForCausalLM",
        max_model_len=196608,
    ),
)

# The simulated Hugging Face cache (HF_HOME=/root/.cache/huggingface, the default for root):
# vLLM resolves a repository id to a snapshot directory there, offline.
HF_HUB = "/root/.cache/huggingface/hub"


def hf_snapshot_dir(repo_id: str) -> str:
    """Where huggingface_hub keeps a downloaded repository: models--org--name/snapshots/<rev>."""
    revision = hashlib.sha1(repo_id.encode()).hexdigest()  # noqa: S324 - a name, not security
    return f"{HF_HUB}/models--{repo_id.replace('/', '--')}/snapshots/{revision}"


# Each catalog repository as it sits in every host's cache at boot: repo id -> snapshot dir.
DEFAULT_HF_CACHE: dict[str, str] = {
    m.repo_id: hf_snapshot_dir(m.repo_id) for m in CATALOG if m.repo_id is not None
}
# A model by anything vLLM may be given or resolve it to: local path, repo id, cache dir.
MODELS_BY_PATH: dict[str, CatalogModel] = {
    **{m.path: m for m in CATALOG},
    **{m.repo_id: m for m in CATALOG if m.repo_id is not None},
    **{hf_snapshot_dir(m.repo_id): m for m in CATALOG if m.repo_id is not None},
}

# What every host has on disk at boot: path -> weights GiB. Tests add and remove paths per host.
DEFAULT_DISK: dict[str, float] = {
    **{m.path: m.weights_gib for m in CATALOG},
    **{hf_snapshot_dir(m.repo_id): m.weights_gib for m in CATALOG if m.repo_id is not None},
}

DEFAULT_MODEL = CATALOG[0]
DEFAULT_UNIT = "vllm-kimi-k25.service"
DEFAULT_PORT = 8000
# Each host's load balancer (simulator.state.load): its client, and its HTTP agent's port on the
# host's loopback, which drain hooks call.
LB_DRAIN = "/usr/local/bin/lb-drain"
LB_AGENT_PORT = 9180
DEFAULT_TP = 8
UNIT_DIR = "/etc/systemd/system"
VLLM_BINARY = "/opt/vllm/.venv/bin/vllm"
VLLM_VERSION = "0.11.2"
# A wheel directory on every host (pip install --no-index --find-links): the engine's own wheel.
WHEEL_DIR = "/opt/wheels"
# The unit shape operators write by hand (unit_style="envfile"): the model and its name come
# from an environment file that also holds a Hugging Face token.
ENV_FILE = "/etc/vllm/kimi-k25.env"
UNIT_STYLES = ("controlplane", "envfile")


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


def envfile_unit_text(*, env_file: str = ENV_FILE, port: int = DEFAULT_PORT) -> str:
    """The hand-written unit shape: the model comes from EnvironmentFile= through ${VAR}."""
    return (
        "[Unit]\n"
        "Description=vLLM Kimi-K2.5 NVFP4\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"EnvironmentFile={env_file}\n"
        "Environment=VLLM_USE_V1=1\n"
        f"ExecStart={VLLM_BINARY} serve ${{MODEL}} --served-model-name ${{SERVED_MODEL_NAME}} "
        f"--tensor-parallel-size {DEFAULT_TP} --max-model-len {DEFAULT_MODEL.max_model_len} "
        f"--port {port}\n"
        "LimitNOFILE=1048576\n"
        "Restart=on-failure\n"
        "RestartSec=10\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


# A fake token, distinctive enough that a test can search a whole snapshot for it.
FAKE_HF_TOKEN = "hf_simulatedTokenDoNotLeak0123456789"


def envfile_text(*, hf_token: str = FAKE_HF_TOKEN) -> str:
    """The environment file of the hand-written shape, with a (fake) secret in it."""
    return (
        "# vLLM Kimi-K2.5 on this host\n"
        "MODEL=nvidia/Kimi-K2.5-NVFP4\n"
        "SERVED_MODEL_NAME=kimi-k2.5\n"
        f"HF_TOKEN={hf_token}\n"
    )
