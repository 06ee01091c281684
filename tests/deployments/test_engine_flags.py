"""Extra engine arguments read the way the engines read them (no database, no SSH)."""

from __future__ import annotations

import pytest

from deployments.unit_files.engine_flags import (
    EngineArgRefused,
    check_harmless_list,
    normalise_extra_args,
)
from deployments.unit_files.serving_plan import plan_changes, plan_from_argv, plan_from_unit_text

KIMI = "/models/moonshotai/Kimi-K2.5-NVFP4"
RENDERED = [
    "/opt/vllm/.venv/bin/vllm", "serve", KIMI, "--served-model-name", "kimi-k2.5",
    "--tensor-parallel-size", "8", "--max-model-len", "262144", "--port", "8000",
    "--host", "127.0.0.1",
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "flag", "field"),
    [
        (["--model=/models/Qwen/Qwen3-235B-A22B-FP8"], "--model", "model field"),
        (["--model", "/models/Qwen/Qwen3-235B-A22B-FP8"], "--model", "model field"),
        (["--served-model-name=kimi-k2.5"], "--served-model-name", "served name"),
        (["--served_model_name=kimi"], "--served-model-name", "served name"),
        (["--served=kimi"], "--served-model-name", "served name"),
        (["--tensor-parallel-size=1"], "--tensor-parallel-size", "tensor_parallel_size"),
        (["--tensor_parallel_size=1"], "--tensor-parallel-size", "tensor_parallel_size"),
        (["--tensor-parallel", "1"], "--tensor-parallel-size", "tensor_parallel_size"),
        (["--tp-size=1"], "--tp-size", "tensor_parallel_size"),
        (["--host=0.0.0.0"], "--host", "bind_address"),
        (["--ho", "0.0.0.0"], "--host", "bind_address"),
        (["--port=9000"], "--port", "port field"),
        (["--max-model-len=4096"], "--max-model-len", "max_model_len"),
        (["--max_model=4096"], "--max-model-len", "max_model_len"),
        (["--context-length=4096"], "--context-length", "max_model_len"),
        (["--model-path=/models/x"], "--model-path", "model field"),
        (["--config=/etc/vllm/serve.yaml"], "--config", "config file"),
        (["--uds=/run/vllm.sock"], "--uds", "bind_address"),
    ],
)
def test_reserved_flags_are_refused_in_every_spelling(args, flag, field) -> None:
    with pytest.raises(EngineArgRefused) as refused:
        normalise_extra_args(args)
    assert str(refused.value).startswith(flag)
    assert field in str(refused.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-tp", "1"], "short option"),
        (["-q", "fp8"], "short option"),
        (["--hf-overrides.architectures=X"], "inside a JSON argument"),
        (["stray"], "not a flag"),
        (["--enforce-eager", "x"], "--enforce-eager takes no value"),
        (["--trust-remote-code=yes"], "switch and takes no value"),
        (["--api-key=sk-123"], "secret"),
        (["--hf_token", "hf_abc"], "secret"),
        (["--allowed=x"], "ambiguous"),
    ],
)
def test_arguments_the_engine_would_misread_are_refused(args, message) -> None:
    with pytest.raises(EngineArgRefused, match=message):
        normalise_extra_args(args)


def test_accepted_arguments_are_stored_as_the_engine_reads_them() -> None:
    assert normalise_extra_args(
        ["--max_num_seqs", "64", "--gpu-memory=0.95", "--no-enable-prefix-caching", "--enable-lor"]
    ) == [
        "--max-num-seqs=64",
        "--gpu-memory-utilization=0.95",
        "--no-enable-prefix-caching",
        "--enable-lora",
    ]


def test_a_rendered_command_line_reads_back_as_its_plan() -> None:
    plan = plan_from_argv([*RENDERED, "--pipeline-parallel-size=2", "--trust-remote-code"])
    assert (plan.engine, plan.model, plan.served_names) == ("vllm", KIMI, ("kimi-k2.5",))
    assert (plan.tensor_parallel_size, plan.pipeline_parallel_size, plan.gpus_needed) == (8, 2, 16)
    assert (plan.port, plan.host, plan.max_model_len) == (8000, "127.0.0.1", 262144)
    assert plan.flags == {"--trust-remote-code": None}


def test_a_hand_written_unit_reads_with_continuations_and_the_last_exec_start() -> None:
    text = (
        "[Service]\n"
        "ExecStart=/bin/true\n"
        "ExecStart=/opt/vllm/.venv/bin/vllm serve nvidia/Kimi-K2.5-NVFP4 \\\n"
        "    --served-model-name kimi --tp 4 --trust-remote-code\n"
    )
    plan = plan_from_unit_text(text)
    assert (plan.model, plan.served_names, plan.tensor_parallel_size) == (
        "nvidia/Kimi-K2.5-NVFP4",
        ("kimi",),
        4,
    )
    assert plan.host is None and "--trust-remote-code" in plan.flags


def test_changes_between_plans_say_what_changed_and_why() -> None:
    before = plan_from_argv(RENDERED)
    after = plan_from_argv(
        [*RENDERED[:6], "1", *RENDERED[7:-1], "0.0.0.0", "--trust-remote-code", "--max-num-seqs=8"]
    )
    changes = {c.what: c for c in plan_changes(before, after, harmless=["--max-num-seqs"])}
    assert set(changes) == {
        "tensor-parallel size",
        "bind address",
        "--trust-remote-code",
        "--max-num-seqs",
    }
    assert changes["bind address"].describe() == "bind address: 127.0.0.1 → 0.0.0.0"
    assert "runs Python code" in changes["--trust-remote-code"].why
    assert changes["--max-num-seqs"].why == ""  # marked harmless by the administrator


def test_a_flag_that_is_not_marked_harmless_needs_approval() -> None:
    before = plan_from_argv(RENDERED)
    after = plan_from_argv([*RENDERED, "--swap-space=16"])
    (change,) = plan_changes(before, after, harmless=[])
    assert change.why == "not listed in HARMLESS_ENGINE_FLAGS"


def test_sensitive_flags_stay_sensitive_even_when_listed_as_harmless() -> None:
    before = plan_from_argv(RENDERED)
    after = plan_from_argv([*RENDERED, "--trust-remote-code"])
    (change,) = plan_changes(before, after, harmless=["--trust-remote-code"])
    assert change.why
    assert check_harmless_list(["--trust-remote-code", "--port", "--max-num-seqs"]) == [
        "--trust-remote-code can never be harmless: it runs Python code shipped with the model "
        "repository",
        "--port is set by the deployment's port field",
    ]
