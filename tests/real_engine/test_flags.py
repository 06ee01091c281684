"""The flag capture is what the pinned vLLM's parser prints, and the comparison reads it right.

The capture (captures/vllm-0.32.0-flags.json) is committed; when vLLM is bumped, or the capture
is stale, refresh it with ``python tests/real_engine/flag_tables.py`` and see what
``python tests/real_engine/flag_tables.py --report`` says changed for the product's and the
simulator's tables.
"""

from __future__ import annotations

import json

import pytest

from tests.real_engine import environment, flag_tables


@pytest.mark.real_engine
@pytest.mark.timeout(900)  # installs the pinned vLLM first on a fresh machine
def test_the_flag_capture_is_what_the_pinned_parser_prints(
    real_env: environment.RealEnv,
) -> None:
    printed = flag_tables.dump_text(real_env)
    document = json.loads(printed)

    assert document["vllm_version"] == environment.VLLM_VERSION
    assert flag_tables.CAPTURE.read_text(encoding="utf-8") == printed, (
        f"{flag_tables.CAPTURE.name} is not what vLLM {environment.VLLM_VERSION}'s parser "
        "prints: refresh it with `python tests/real_engine/flag_tables.py`"
    )
    by_flag = {s: o for o in document["options"] for s in o["option_strings"]}
    # Facts the product's tables are to be held to (issue 19).
    assert by_flag["--device-memory-utilization"] is by_flag["--gpu-memory-utilization"]
    assert by_flag["--gpu-memory-utilization"]["default"] == 0.92
    assert "--disable-log-requests" not in by_flag
    assert by_flag["--enable-log-requests"]["action"] == "BooleanOptionalAction"
    assert all(option["help"] for option in document["options"])


@pytest.mark.real_engine
@pytest.mark.timeout(900)
def test_the_command_line_capture_is_how_the_pinned_parser_reads(
    real_env: environment.RealEnv,
) -> None:
    printed = flag_tables.dump_text(real_env, flag_tables.ARGV_DUMP)
    assert flag_tables.ARGV_CAPTURE.read_text(encoding="utf-8") == printed, (
        f"{flag_tables.ARGV_CAPTURE.name} is not how vLLM {environment.VLLM_VERSION}'s parser "
        "reads its command lines: refresh it with `python tests/real_engine/flag_tables.py`"
    )
    cases = {tuple(case["argv"]): case for case in json.loads(printed)["cases"]}
    # Facts the simulator is to be held to (issue 19).
    assert cases[("/models/m", "--disable-log-requests")]["exit"] == 2
    assert cases[("/models/m", "-O", "3")]["ok"]["optimization_level"] == "3"
    assert cases[("/models/m", "--device-memory-utilization", "0.5")]["ok"] == {
        "model_tag": "/models/m",
        "gpu_memory_utilization": 0.5,
    }


def _capture(*options: dict[str, object]) -> dict[str, object]:
    return {"vllm_version": "9.9.9", "options": list(options)}


def _option(*names: str, action: str = "_StoreAction") -> dict[str, object]:
    return {"option_strings": list(names), "action": action}


def test_compare_reports_unknown_stale_and_half_known_flags() -> None:
    capture = _capture(
        {"option_strings": [], "action": "_StoreAction"},  # model_tag: positional, ignored
        _option("--gpu-memory-utilization", "--device-memory-utilization"),
        _option("--worker-cls"),
        _option("--enforce-eager", "--no-enforce-eager", action="BooleanOptionalAction"),
        _option("--api-server-count", "-asc"),
    )

    found = flag_tables.compare(
        capture,
        product_known=["--gpu-memory-utilization", "--enforce-eager", "--tp-size"],
        simulator_flags=["--gpu-memory-utilization", "--enforce-eager", "--swap-space"],
    )

    assert found.vllm_options == 4
    assert found.vllm_long_flags == 6
    assert found.unknown_to_product == ["--api-server-count", "--worker-cls"]
    assert found.product_not_in_vllm == ["--tp-size"]
    assert found.product_knows_one_name_only == [
        ["--gpu-memory-utilization", "--device-memory-utilization"]
    ]
    assert found.simulator_not_in_vllm == ["--swap-space"]
    assert found.simulator_missing == [
        "--api-server-count",
        "--device-memory-utilization",
        "--worker-cls",
    ]
    assert found.counts()["unknown_to_product"] == 2
