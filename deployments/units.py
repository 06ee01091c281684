"""Rendering a deployment's systemd unit. Pure: values in, text out.

Every value has passed the model validators already; the ExecStart line is still assembled with
shlex.join so that nothing can split into extra words.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass

from hosts import commands


@dataclass(frozen=True)
class UnitSpec:
    unit: str
    engine: str
    engine_binary: str
    model_path: str
    served_name: str
    tensor_parallel_size: int
    max_model_len: int
    port: int
    bind_address: str
    extra_args: tuple[str, ...]
    revision: int


def exec_start(spec: UnitSpec) -> str:
    commands.check_path(spec.engine_binary)
    commands.check_path(spec.model_path)
    commands.check_port(spec.port)
    commands.check_address(spec.bind_address)
    if spec.engine == "sglang":
        argv = [
            spec.engine_binary, "-m", "sglang.launch_server",
            "--model-path", spec.model_path,
            "--served-model-name", spec.served_name,
            "--tp-size", str(spec.tensor_parallel_size),
            "--context-length", str(spec.max_model_len),
            "--port", str(spec.port),
            "--host", spec.bind_address,
        ]  # fmt: skip
    else:
        argv = [
            spec.engine_binary, "serve", spec.model_path,
            "--served-model-name", spec.served_name,
            "--tensor-parallel-size", str(spec.tensor_parallel_size),
            "--max-model-len", str(spec.max_model_len),
            "--port", str(spec.port),
            "--host", spec.bind_address,
        ]  # fmt: skip
    return shlex.join([*argv, *spec.extra_args])


def render_unit(spec: UnitSpec) -> str:
    commands.check_unit(spec.unit)
    return (
        "[Unit]\n"
        f"Description={spec.engine} server {spec.served_name} "
        f"(controlplane revision {spec.revision})\n"
        "After=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"ExecStart={exec_start(spec)}\n"
        "Restart=no\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def unit_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
