"""What a unit's engine arguments do on a simulated host, seen over real SSH: usage errors that
fail the start, the address the server binds, the API key, tp x pp x dp on the GPUs."""

from __future__ import annotations

import json

from hosts import commands
from simulator import catalog
from simulator.state import GPU_MEMORY_MIB
from tests.fleet import FleetHandle, ssh

UNIT = catalog.DEFAULT_UNIT
QWEN = "/models/Qwen/Qwen3-235B-A22B-FP8"


def deploy(fleet: FleetHandle, text: str, name: str = "gpu-01") -> None:
    """Write the unit, reload and restart it the way the control plane does, over SSH."""
    write = commands.with_sudo(commands.write_unit_file(UNIT), True)
    assert ssh(fleet, name, commands.join(write), stdin=text).exit_status == 0
    for argv in (commands.daemon_reload(), commands.unit_action("restart", UNIT)):
        result = ssh(fleet, name, commands.join(commands.with_sudo(argv, True)))
        assert result.exit_status == 0, result.stderr


def journal(fleet: FleetHandle, lines: int = 40, name: str = "gpu-01") -> list[str]:
    return str(ssh(fleet, name, commands.render(commands.unit_journal(UNIT, lines))).stdout).split(
        "\n"
    )


def curl(fleet: FleetHandle, url: str, *extra: str, name: str = "gpu-01") -> tuple[str, str, int]:
    argv = ["curl", "-sS", *extra, "-w", "\\n%{http_code}\\n", url]
    result = ssh(fleet, name, commands.join(argv))
    return str(result.stdout), str(result.stderr), int(result.exit_status or 0)


def test_an_unknown_flag_fails_the_start_with_argparse_usage(sim_fleet: FleetHandle) -> None:
    deploy(sim_fleet, catalog.unit_file_text(extra_args=("--enforce-eager", "--foo=1")))
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "failed", timeout=5)
    assert unit["usage_error"] == "unrecognized arguments: --foo=1" and unit["main_pid"] == 0
    assert journal(sim_fleet)[-7:-1] == [  # vLLM 0.32's usage, wrapped at 80 columns
        "usage: vllm [-h] [-v]",
        "            {chat,complete,serve,launch,bench,collect-env,download-kernels,preload,"
        "run-batch,snapshot}",
        "            ...",
        "vllm: error: unrecognized arguments: --foo=1",
        f"{UNIT}: Main process exited, code=exited, status=2/INVALIDARGUMENT",
        f"{UNIT}: Failed with result 'exit-code'.",
    ]
    out, _err, status = curl(sim_fleet, "http://127.0.0.1:8000/health")
    assert status == 7 and out == "\n000\n"


def test_an_ambiguous_abbreviation_is_the_serve_parsers_error(sim_fleet: FleetHandle) -> None:
    deploy(sim_fleet, catalog.unit_file_text(extra_args=("--max=4096",)))
    sim_fleet.wait_for_unit("gpu-01", UNIT, "failed", timeout=5)
    lines = journal(sim_fleet, 4)
    assert lines[0] == "usage: vllm serve [model_tag] [options]"
    assert lines[1].startswith(
        "vllm serve: error: ambiguous option: --max=4096 could match --max-log-len, "
        "--max-model-len, --max-logprobs,"
    )


def test_abbreviations_and_underscores_change_what_serves(sim_fleet: FleetHandle) -> None:
    text = catalog.unit_file_text(
        extra_args=("--served_model=kimi-prod", "--max-model=32k", "--gpu-memory-util=0.95")
    )
    deploy(sim_fleet, text)
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    assert (unit["served_name"], unit["max_model_len"]) == ("kimi-prod", 32000)
    assert unit["gpu_memory_utilization"] == 0.95
    out, _err, status = curl(sim_fleet, "http://127.0.0.1:8000/v1/models")
    assert status == 0 and json.loads(out.split("\n")[0])["data"][0]["id"] == "kimi-prod"
    non_default = [line for line in journal(sim_fleet, 200) if "non-default args" in line][-1]
    assert "'max_model_len': 32000, 'served_model_name': ['kimi-prod']" in non_default


def test_every_served_model_name_is_listed_and_accepted(sim_fleet: FleetHandle) -> None:
    text = catalog.unit_file_text(extra_args=("--served-model-name", "kimi", "kimi-k2.5-prod"))
    deploy(sim_fleet, text)
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    assert unit["served_names"] == ["kimi", "kimi-k2.5-prod"] and unit["served_name"] == "kimi"
    out, _err, _status = curl(sim_fleet, "http://127.0.0.1:8000/v1/models")
    ids = [card["id"] for card in json.loads(out.split("\n")[0])["data"]]
    assert ids == ["kimi", "kimi-k2.5-prod"]
    body = json.dumps({"model": "kimi-k2.5-prod", "prompt": "2 + 2 =", "max_tokens": 2})
    out = str(
        ssh(sim_fleet, "gpu-01", commands.render(commands.completion_request(8000, body))).stdout
    )
    assert json.loads(out.rsplit("\n@@cp:http:", 1)[0])["model"] == "kimi-k2.5-prod"


def test_the_model_flag_next_to_the_positional_is_left_over(sim_fleet: FleetHandle) -> None:
    deploy(sim_fleet, catalog.unit_file_text(extra_args=(f"--model={QWEN}",)))
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "failed", timeout=5)
    assert unit["usage_error"] == f"unrecognized arguments: {catalog.DEFAULT_MODEL.path}"
    assert any("the `--model` option" in line for line in journal(sim_fleet, 8))


def test_a_server_bound_elsewhere_is_not_reached_on_loopback(sim_fleet: FleetHandle) -> None:
    deploy(sim_fleet, catalog.unit_file_text(host="10.20.30.40"))
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    assert unit["host"] == "10.20.30.40" and not unit["reachable_on_loopback"]
    out, err, status = run_health(sim_fleet)
    assert status == 7 and "@@cp:http:000" in out
    assert err == ""  # the probe's curl writes its error to stdout (2>&1 is not used here)
    _out, _err, status = curl(sim_fleet, "http://10.20.30.40:8000/health")
    assert status == 0
    assert any(
        "Starting vLLM server on http://10.20.30.40:8000" in line for line in journal(sim_fleet, 60)
    )


def run_health(fleet: FleetHandle) -> tuple[str, str, int]:
    result = ssh(fleet, "gpu-01", commands.render(commands.http_get(8000, "/health")))
    return str(result.stdout), str(result.stderr), int(result.exit_status or 0)


def test_loopback_and_wildcard_binds_are_reached(sim_fleet: FleetHandle) -> None:
    for host in ("127.0.0.1", "0.0.0.0", "::", "localhost"):
        deploy(sim_fleet, catalog.unit_file_text(host=host))
        unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
        assert unit["host"] == host and unit["reachable_on_loopback"], host
        assert run_health(sim_fleet)[2] == 0, host
    deploy(sim_fleet, catalog.unit_file_text(host="::1"))
    sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    assert run_health(sim_fleet)[2] == 7
    assert curl(sim_fleet, "http://localhost:8000/health")[2] == 0  # curl tries ::1 first


def test_a_unix_socket_or_headless_engine_opens_no_port(sim_fleet: FleetHandle) -> None:
    deploy(sim_fleet, catalog.unit_file_text(extra_args=("--uds=/run/vllm.sock",)))
    sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    assert run_health(sim_fleet)[2] == 7
    deploy(sim_fleet, catalog.unit_file_text(extra_args=("--headless",)))
    sim_fleet.wait_for(
        "gpu-01", lambda s: s["units"][UNIT]["phase"] == "ready", timeout=5
    )  # the engine loads...
    state = sim_fleet.state("gpu-01")
    assert state["units"][UNIT]["healthy"] is False and state["models"] == []
    assert run_health(sim_fleet)[2] == 7  # ...but there is no API server
    assert state["gpus"][0]["memory_used_mib"] == int(0.92 * GPU_MEMORY_MIB)


def test_the_api_key_guards_v1_and_is_never_shown(sim_fleet: FleetHandle) -> None:
    deploy(sim_fleet, catalog.unit_file_text(extra_args=("--api-key=s3cr3t-key",)))
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    assert unit["api_key_set"] is True and "s3cr3t" not in json.dumps(unit)
    assert run_health(sim_fleet)[2] == 0  # /health, /metrics and /version stay open
    out, _err, _status = curl(sim_fleet, "http://127.0.0.1:8000/v1/models")
    assert out == '{"error":"Unauthorized"}\n401\n'
    out, _err, _status = curl(
        sim_fleet, "http://127.0.0.1:8000/v1/models", "-H", "Authorization: Bearer s3cr3t-key"
    )
    assert out.endswith("\n200\n")
    assert not any("s3cr3t" in line for line in journal(sim_fleet, 200))
    assert any("'api_key': '***'" in line for line in journal(sim_fleet, 200))


def test_help_prints_and_exits_zero(sim_fleet: FleetHandle) -> None:
    deploy(sim_fleet, catalog.unit_file_text(extra_args=("--help",)))
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "stopped", timeout=5)
    assert (unit["active_state"], unit["sub_state"], unit["result"]) == (
        "inactive",
        "dead",
        "success",
    )
    lines = journal(sim_fleet, 40)
    assert "usage: vllm serve [model_tag] [options]" in lines
    assert lines[-2] == f"{UNIT}: Deactivated successfully."


def test_tensor_pipeline_and_data_parallel_share_the_gpus(sim_fleet: FleetHandle) -> None:
    text = catalog.unit_file_text(
        model_path=QWEN,
        served_name="qwen3-235b",
        tensor_parallel_size=2,
        max_model_len=40960,
        extra_args=("--pipeline-parallel-size=2", "--data-parallel-size=2"),
    )
    deploy(sim_fleet, text)
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    assert unit["gpus"] == list(range(8))
    assert (unit["pipeline_parallel_size"], unit["data_parallel_size"]) == (2, 2)
    apps = sim_fleet.state("gpu-01")["compute_apps"]
    names = [a["process_name"] for a in apps]
    assert names[:4] == [
        "VLLM::Worker_DP0_PP0_TP0",
        "VLLM::Worker_DP0_PP0_TP1",
        "VLLM::Worker_DP0_PP1_TP0",
        "VLLM::Worker_DP0_PP1_TP1",
    ]
    assert names[4] == "VLLM::Worker_DP1_PP0_TP0"
    owners = sim_fleet.processes("gpu-01")
    assert all(owners[a["pid"]] == UNIT for a in apps)
    ranks = [line for line in journal(sim_fleet, 200) if "is assigned as DP rank 1" in line]
    assert len(ranks) == 4 and "DP rank 1, PP rank 1, TP rank 1" in ranks[-1]


def test_more_replicas_than_gpus_fail_at_launch(sim_fleet: FleetHandle) -> None:
    text = catalog.unit_file_text(tensor_parallel_size=4, extra_args=("-dp", "4"))
    deploy(sim_fleet, text)
    sim_fleet.wait_for_unit("gpu-01", UNIT, "failed", timeout=5)
    assert any(
        'Exception: Error setting CUDA_VISIBLE_DEVICES: local range: [8, 12) base value: "0,1,2'
        in line
        for line in journal(sim_fleet, 40)
    )


def test_a_quantization_that_is_not_the_checkpoints_fails(sim_fleet: FleetHandle) -> None:
    deploy(sim_fleet, catalog.unit_file_text(extra_args=("--quantization=fp8",)))
    sim_fleet.wait_for_unit("gpu-01", UNIT, "failed", timeout=5)
    assert any(
        "ValueError: Quantization method specified in the model config (modelopt_fp4) does not "
        "match the quantization method specified in the `quantization` argument (fp8)." in line
        for line in journal(sim_fleet, 40)
    )
    deploy(sim_fleet, catalog.unit_file_text(extra_args=("-q", "modelopt_fp4")))
    sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)


def test_a_config_file_is_read_when_the_unit_starts(sim_fleet: FleetHandle) -> None:
    text = catalog.unit_file_text(extra_args=("--config", "/etc/vllm/serve.yaml"))
    deploy(sim_fleet, text)
    sim_fleet.wait_for_unit("gpu-01", UNIT, "failed", timeout=5)
    lines = journal(sim_fleet, 40)
    assert any("Unable to read the config file at /etc/vllm/serve.yaml" in line for line in lines)
    assert "FileNotFoundError: [Errno 2] No such file or directory: '/etc/vllm/serve.yaml'" in lines
    sim_fleet.write_file("gpu-01", "/etc/vllm/serve.yaml", "port: 8001\nenforce-eager: true\n")
    sim_fleet.start_unit("gpu-01")
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    # The unit's own --port 8000 comes after the file's flags, so it wins.
    assert unit["port"] == 8000
    assert any("'enforce_eager': True" in line for line in journal(sim_fleet, 200))


def test_flags_the_control_planes_tests_use_are_known(sim_fleet: FleetHandle) -> None:
    flags = ("--enforce-eager", "--gpu-memory-utilization=0.95", "--enable-expert-parallel")
    deploy(sim_fleet, catalog.unit_file_text(extra_args=flags))
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    assert unit["gpu_memory_utilization"] == 0.95
