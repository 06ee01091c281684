"""Units as operators write them: a change rewrites only its command line and the environment
it changes; everything else stays byte for byte."""

from __future__ import annotations

import pytest

from deployments.unit_files import units
from hosts.commands import UnsafeCommand

HAND_WRITTEN = """\
# /etc/systemd/system/vllm-kimi-k25.service: written by hand, kept by the control plane
[Unit]
Description=Kimi K2.5 (vLLM)
After=network-online.target

[Service]
Type=simple
EnvironmentFile=/etc/vllm/kimi-k25.env
Environment=VLLM_USE_V1=1 "NCCL_DEBUG=WARN"
Environment=CUDA_DEVICE_ORDER=PCI_BUS_ID
ExecStart=/opt/vllm/.venv/bin/vllm serve ${MODEL} \\
    --served-model-name ${SERVED_MODEL_NAME} --tensor-parallel-size 8 \\
    --max-model-len 262144 --port 8000
LimitNOFILE=1048576
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""
NEW_COMMAND = (
    "/opt/vllm/.venv/bin/vllm serve /models/moonshotai/Kimi-K2.5-INT4 --served-model-name "
    "kimi-k2.5 --tensor-parallel-size 8 --max-model-len 262144 --port 8000 --host 127.0.0.1"
)


def test_a_rewrite_replaces_the_command_line_and_nothing_else() -> None:
    env = units.environment_of(HAND_WRITTEN)
    text = units.rewrite_unit(HAND_WRITTEN, exec_start_line=NEW_COMMAND, old_env=env, new_env=env)
    before, after = HAND_WRITTEN.splitlines(), text.splitlines()
    assert [line for line in before if line not in after] == [
        "ExecStart=/opt/vllm/.venv/bin/vllm serve ${MODEL} \\",
        "    --served-model-name ${SERVED_MODEL_NAME} --tensor-parallel-size 8 \\",
        "    --max-model-len 262144 --port 8000",
    ]
    assert [line for line in after if line not in before] == [f"ExecStart={NEW_COMMAND}"]
    assert units.exec_start_of(text) == NEW_COMMAND


def test_environment_changes_touch_only_their_own_assignments() -> None:
    env = units.environment_of(HAND_WRITTEN)
    assert env == {"VLLM_USE_V1": "1", "NCCL_DEBUG": "WARN", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    new = {**env, "NCCL_DEBUG": "INFO", "VLLM_ATTENTION_BACKEND": "FLASHINFER"}
    text = units.rewrite_unit(HAND_WRITTEN, exec_start_line=NEW_COMMAND, old_env=env, new_env=new)
    assert units.environment_of(text) == new
    assert "Environment=CUDA_DEVICE_ORDER=PCI_BUS_ID\n" in text  # untouched, byte for byte
    assert "Environment=VLLM_USE_V1=1\n" in text  # its line lost only NCCL_DEBUG
    assert "LimitNOFILE=1048576\nRestart=on-failure\n" in text


def test_a_percent_in_a_value_is_written_so_systemd_does_not_expand_it() -> None:
    """systemd expands specifiers in Environment= (%h is a home directory, %i an instance):
    the value the operator typed, "a%h", is written a%%h and read back as typed."""
    env = units.environment_of(HAND_WRITTEN)
    new = {**env, "PROXY_PATH": "/v1%2Fmodels", "TAG": "a%h"}
    text = units.rewrite_unit(HAND_WRITTEN, exec_start_line=NEW_COMMAND, old_env=env, new_env=new)
    assert "Environment=PROXY_PATH=/v1%%2Fmodels\n" in text
    assert "Environment=TAG=a%%h\n" in text
    assert units.environment_of(text) == new


def test_a_unit_without_a_command_line_cannot_be_rewritten() -> None:
    with pytest.raises(units.UnitNotRewritable):
        units.rewrite_unit("[Service]\nType=simple\n", exec_start_line="x", old_env={}, new_env={})


@pytest.mark.parametrize(
    "env", [{"lower": "1"}, {"A": "two words"}, {"A": "x\nExecStartPre=/bin/rm -rf /"}]
)
def test_environment_outside_the_safe_alphabet_is_refused(env) -> None:
    with pytest.raises(UnsafeCommand):
        units.rewrite_unit(HAND_WRITTEN, exec_start_line=NEW_COMMAND, old_env={}, new_env=env)


@pytest.mark.parametrize("model", ["/models/x", "nvidia/Kimi-K2.5-NVFP4", "Qwen3-0.6B"])
def test_a_model_is_a_path_or_a_repository_id(model) -> None:
    assert units.check_model_location(model) == model


@pytest.mark.parametrize("model", ["../etc/passwd", "a b", "x;reboot", "org/name/extra", ""])
def test_anything_else_is_not_a_model(model) -> None:
    with pytest.raises(UnsafeCommand):
        units.check_model_location(model)
