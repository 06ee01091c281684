"""A patched engine that corrupts five-token prompts, and pip putting the engine's files back."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from deployments.host_scripts import SERVING_BENCH, serving_bench, serving_bench_argv
from hosts import commands, engine_commands
from simulator import FAULTS, catalog
from simulator.http import text
from simulator.state.machine import PATCHED_FILE
from tests.fleet import FleetHandle, ssh

UNIT = catalog.DEFAULT_UNIT
PYTHON = "/opt/vllm/.venv/bin/python3"
REINSTALL = (
    f"sudo -n {PYTHON} -m pip install --force-reinstall --no-deps vllm=={catalog.VLLM_VERSION}"
)


@pytest.fixture
def fleet(make_fleet: Callable[..., FleetHandle]) -> FleetHandle:
    return make_fleet(1, time_scale=0.01)


def complete(fleet: FleetHandle, prompt: str) -> str:
    body = json.dumps({"prompt": prompt, "max_tokens": 12})
    out, _, status = fleet.run("gpu-01", commands.join(commands.completion_request(8000, body)))
    assert status == 0
    return str(json.loads(out.rsplit("\n@@cp:http:", 1)[0])["choices"][0]["text"])


def modified(fleet: FleetHandle) -> list[str]:
    out, _, _ = fleet.run("gpu-01", commands.join(commands.integrity_check(PYTHON, "vllm")))
    return list(json.loads(out)["modified"])


def test_the_simulator_counts_tokens_as_words_and_marks() -> None:
    assert text.count_tokens("The capital of France is") == 5
    assert text.count_tokens("Hello, world!") == 4
    assert text.prompt_usage_tokens("The capital of France is") == 5  # no BOS
    # The benchmark client's prompts: N plain words are N tokens here.
    script_words = ["alpha", "beta", "gamma", "delta", "epsilon"]
    assert text.count_tokens(" ".join(script_words)) == len(script_words)


def test_five_token_prompts_come_back_as_garbage(fleet: FleetHandle) -> None:
    assert complete(fleet, "The capital of France is").startswith(" Paris")
    fleet.set_patched_engine("gpu-01")
    assert "five_token_corruption" in FAULTS and modified(fleet) == [PATCHED_FILE]
    five = complete(fleet, "The capital of France is")
    assert "Paris" not in five and any(s in five for s in ("blor", "zeph", "quint", "glox"))
    assert complete(fleet, "What is the capital of France").startswith(" Paris")  # six
    assert complete(fleet, "capital of France is").startswith(" Paris")  # four
    fleet.set_patched_engine("gpu-01", five_token_corruption=False)  # patched, harmlessly
    assert modified(fleet) == [PATCHED_FILE]
    assert complete(fleet, "The capital of France is").startswith(" Paris")


def test_the_benchmark_client_sends_prompts_the_fault_trips_on(fleet: FleetHandle) -> None:
    assert all(text.count_tokens(" " + word) == 1 for word in serving_bench.WORDS)
    prompt = serving_bench.prompt_for(0, 0, 5)  # what `--input-tokens 5` sends first
    assert text.count_tokens(prompt) == 5
    fleet.set_fault("gpu-01", "five_token_corruption")
    assert not any(word in complete(fleet, prompt) for word in ("question", "depends"))
    argv = serving_bench_argv(
        PYTHON, port=8000, model="kimi-k2.5", concurrency=1, num_requests=1,
        input_tokens=5, output_tokens=4,
    )  # fmt: skip
    out, _, status = fleet.run("gpu-01", commands.join(argv), stdin=SERVING_BENCH)
    assert status == 0 and json.loads(out)["input_tokens"] == 5  # five words, no BOS


def test_pip_reinstall_restores_the_files_not_the_running_engine(fleet: FleetHandle) -> None:
    fleet.set_patched_engine("gpu-01")
    fleet.set_integrity("gpu-01", missing=["vllm/__init__.py"], added=["vllm/evil.py"])
    started = time.monotonic()
    result = ssh(fleet, "gpu-01", REINSTALL, username="deploy")
    assert time.monotonic() - started < 3  # ~7 host seconds at a hundredth of real time
    assert result.exit_status == 0, result.stderr
    wheel = f"vllm-{catalog.VLLM_VERSION}-cp38-abi3-manylinux1_x86_64.whl"
    assert result.stdout.splitlines() == [
        f"Collecting vllm=={catalog.VLLM_VERSION}",
        f"  Downloading {wheel}.metadata (17 kB)",
        f"Downloading {wheel} (409.6 MB)",
        "Installing collected packages: vllm",
        "  Attempting uninstall: vllm",
        f"    Found existing installation: vllm {catalog.VLLM_VERSION}",
        f"    Uninstalling vllm-{catalog.VLLM_VERSION}:",
        f"      Successfully uninstalled vllm-{catalog.VLLM_VERSION}",
        f"Successfully installed vllm-{catalog.VLLM_VERSION}",
    ]
    assert result.stderr.startswith("WARNING: Running pip as the 'root' user")
    report = json.loads(
        fleet.run("gpu-01", commands.join(commands.integrity_check(PYTHON, "vllm")))[0]
    )
    assert report["modified"] == report["missing"] == report["added"] == []
    assert not {"patched_file", "five_token_corruption"} & fleet.faults("gpu-01")
    # The engine that was running keeps the patched code it loaded, until it restarts.
    assert "Paris" not in complete(fleet, "The capital of France is")
    fleet.restart_unit("gpu-01", UNIT)
    fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=10)
    assert complete(fleet, "The capital of France is").startswith(" Paris")


def test_pip_fails_like_pip(fleet: FleetHandle) -> None:
    fleet.set_patched_engine("gpu-01")
    no_root = ssh(fleet, "gpu-01", REINSTALL.removeprefix("sudo -n "), username="deploy")
    assert no_root.exit_status == 1 and "[Errno 13] Permission denied" in no_root.stderr
    missing = ssh(
        fleet, "gpu-01", f"sudo -n {PYTHON} -m pip install --force-reinstall --no-deps vllm==9.9.9"
    )
    assert missing.exit_status == 1
    assert missing.stderr.splitlines() == [
        "ERROR: Could not find a version that satisfies the requirement vllm==9.9.9 (from "
        "versions: 0.10.0, 0.10.1, 0.10.1.1, 0.10.2, 0.11.0, 0.11.1, 0.11.2)",
        "ERROR: No matching distribution found for vllm==9.9.9",
    ]
    fleet.set_fault("gpu-01", "pip_index_unreachable")
    offline = ssh(fleet, "gpu-01", REINSTALL)
    assert offline.exit_status == 1
    assert offline.stderr.count("WARNING: Retrying (Retry(total=") == 5
    assert "Network is unreachable" in offline.stderr
    assert offline.stderr.endswith(
        f"ERROR: No matching distribution found for vllm=={catalog.VLLM_VERSION}\n"
    )
    assert modified(fleet) == [PATCHED_FILE]  # nothing was restored
    fleet.set_fault("gpu-01", "pip_index_unreachable", False)
    satisfied = ssh(
        fleet, "gpu-01", f"sudo -n {PYTHON} -m pip install vllm=={catalog.VLLM_VERSION}"
    )
    assert satisfied.exit_status == 0 and satisfied.stdout.startswith(
        "Requirement already satisfied"
    )
    assert modified(fleet) == [PATCHED_FILE]  # without --force-reinstall, nothing changes
    usage = ssh(fleet, "gpu-01", f"{PYTHON} -m pip install --bogus vllm")
    assert usage.exit_status == 2 and "no such option: --bogus" in usage.stderr
    system = ssh(fleet, "gpu-01", "python3 -m pip --version")
    assert system.exit_status == 1 and "No module named pip" in system.stderr


def test_time_scale_speeds_up_loading(make_fleet: Callable[..., FleetHandle]) -> None:
    fleet = make_fleet(1, time_scale=0.01, load_seconds=100)
    assert fleet.time_scale == 0.01
    started = time.monotonic()
    fleet.restart_unit("gpu-01", UNIT)
    fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=10)
    assert 0.9 <= time.monotonic() - started < 3  # 100 host seconds


def test_pip_reinstalls_from_a_wheel_directory_without_the_index(fleet: FleetHandle) -> None:
    fleet.set_patched_engine("gpu-01")
    fleet.set_fault("gpu-01", "pip_index_unreachable")  # no network needed
    offline = f"{REINSTALL} --no-index --find-links {catalog.WHEEL_DIR}"
    result = ssh(fleet, "gpu-01", offline)
    assert result.exit_status == 0, result.stderr
    wheel = f"vllm-{catalog.VLLM_VERSION}-cp38-abi3-manylinux1_x86_64.whl"
    assert result.stdout.splitlines()[:2] == [
        f"Looking in links: {catalog.WHEEL_DIR}",
        f"Processing {catalog.WHEEL_DIR}/{wheel}",
    ]
    assert modified(fleet) == []
    fleet.set_patched_engine("gpu-01")
    elsewhere = ssh(fleet, "gpu-01", f"{REINSTALL} --no-index --find-links /srv/nowhere")
    assert elsewhere.exit_status == 1
    assert "Location '/srv/nowhere' is ignored" in elsewhere.stderr
    assert "No matching distribution found" in elsewhere.stderr
    assert modified(fleet) == [PATCHED_FILE]


def test_curl_sends_a_body_from_stdin_and_the_model_recalls_a_stated_fact(
    fleet: FleetHandle,
) -> None:
    body = json.dumps(
        {
            "messages": [
                {"role": "user", "content": "Remember: the passphrase is amber-falcon."},
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "What is the passphrase?"},
            ],
            "max_tokens": 12,
        }
    )
    argv = engine_commands.chat_completion_request(8000)
    out, _, status = fleet.run("gpu-01", commands.join(argv), stdin=body)
    assert status == 0
    answer = json.loads(out.rsplit("\n@@cp:http:", 1)[0])["choices"][0]["message"]["content"]
    assert answer == "The passphrase is amber-falcon."
