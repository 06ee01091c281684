"""The simulator over real SSH: formats, the unit lifecycle, GPU memory, HTTP, integrity."""

from __future__ import annotations

import json
import re
import time

import pytest

from hosts import commands, probe_sections
from hosts.commands import ProbeSpec, ServerSpec
from hosts.parsers import parse_probe
from simulator import catalog, running_fleet
from simulator.state import GPU_MEMORY_MIB
from tests.fleet import FleetHandle, ssh

UNIT = catalog.DEFAULT_UNIT
GPU_LINE = re.compile(
    r"^\d, GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}, "
    r"NVIDIA RTX PRO 6000 Blackwell Server Edition, \d+ MiB, 97887 MiB, \d+\.\d\d W, "
    r"600\.00 W, \d+ %, \d+$"
)
APP_LINE = re.compile(r"^\d+, VLLM::Worker_TP\d, \d+ MiB(, GPU-[0-9a-f-]{36})?$")
FULL = int(0.92 * GPU_MEMORY_MIB)  # vLLM 0.32's default --gpu-memory-utilization


def run(fleet: FleetHandle, argv: list[str], name: str = "gpu-01", **kw: str) -> tuple[str, int]:
    result = ssh(fleet, name, commands.render(argv), **kw)
    return str(result.stdout), int(result.exit_status or 0)


def write_unit(fleet: FleetHandle, text: str, name: str = "gpu-01", unit: str = UNIT) -> None:
    argv = commands.with_sudo(commands.write_unit_file(unit), True)
    result = ssh(fleet, name, commands.join(argv), stdin=text)
    assert result.exit_status == 0, result.stderr
    assert result.stdout == text


def action(fleet: FleetHandle, *argv: str, name: str = "gpu-01") -> tuple[str, int]:
    return run(fleet, commands.with_sudo(list(argv), True), name)


def health(fleet: FleetHandle, name: str = "gpu-01", port: int = 8000) -> tuple[str, int]:
    return run(fleet, commands.http_get(port, "/health"), name)


def gpu_lines(fleet: FleetHandle, name: str = "gpu-01") -> list[str]:
    out, status = run(fleet, commands.gpu_query(), name)
    assert status == 0
    return out.splitlines()


def test_probe_script_parses_into_the_simulators_truth(sim_fleet: FleetHandle) -> None:
    spec = ProbeSpec(
        servers=(ServerSpec(UNIT, 8000, "/opt/vllm/.venv/bin/python3"),), integrity=True
    )
    result = ssh(sim_fleet, "gpu-01", probe_sections.probe_script(spec))
    truth = sim_fleet.state("gpu-01")
    parsed = parse_probe(str(result.stdout), [UNIT], integrity=True).state

    assert parsed.problems == []
    assert [g.uuid for g in parsed.gpus] == [g["uuid"] for g in truth["gpus"]]
    assert [g.memory_used_mib for g in parsed.gpus] == [FULL] * 8
    assert [g.memory_used_mib for g in parsed.gpus] == [g["memory_used_mib"] for g in truth["gpus"]]
    assert all(80 <= (g.power_draw_w or 0) <= 120 for g in parsed.gpus)
    assert [a.pid for a in parsed.compute_apps] == [a["pid"] for a in truth["compute_apps"]]
    dep = parsed.deployments[UNIT]
    unit_truth = truth["units"][UNIT]
    assert dep.unit.main_pid == unit_truth["main_pid"] > 0
    assert dep.unit.active_state == "active" and dep.unit.sub_state == "running"
    assert dep.unit.active_enter_timestamp == unit_truth["active_enter_timestamp"]
    path = f"/etc/systemd/system/{UNIT}"
    assert dep.unit_file_sha256 == truth["unit_files"][path]["sha256"]
    assert dep.server.healthy and dep.server.models == ["kimi-k2.5"]
    assert dep.server.model_roots == ["/models/moonshotai/Kimi-K2.5-NVFP4"]
    assert dep.server.max_model_len == 262144
    assert dep.server.requests_running == 0.0
    assert dep.integrity is not None and dep.integrity.clean
    assert dep.integrity.version == "0.11.2"
    assert sim_fleet.command_log("gpu-01") == [probe_sections.probe_script(spec)]


def test_nvidia_smi_formats(sim_fleet: FleetHandle) -> None:
    lines = gpu_lines(sim_fleet)
    assert len(lines) == 8 and all(GPU_LINE.match(line) for line in lines), lines
    assert [line.split(", ")[0] for line in lines] == [str(i) for i in range(8)]
    temps = [int(line.rsplit(", ", 1)[1]) for line in lines]
    assert all(30 <= t <= 45 for t in temps)

    out, _ = run(
        sim_fleet,
        [
            "nvidia-smi",
            "--query-gpu=memory.total,index,power.limit",
            "--format=csv,noheader,nounits",
        ],
    )
    assert out.splitlines()[3] == "97887, 3, 600.00"
    out, _ = run(sim_fleet, ["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv"])
    assert out.splitlines()[0] == "index, memory.used [MiB]"

    out, status = run(sim_fleet, commands.compute_apps_query())
    apps = out.splitlines()
    assert status == 0 and len(apps) == 8 and all(APP_LINE.match(a) for a in apps), apps
    pid = sim_fleet.state("gpu-01")["units"][UNIT]["main_pid"]
    assert [int(a.split(", ")[0]) for a in apps] == [pid + i for i in range(8)]

    out, status = run(sim_fleet, ["nvidia-smi", "--query-gpu=index,bogus", "--format=csv"])
    assert status == 2 and 'Field "bogus" is not a valid field to query.' in out


def test_systemctl_show_known_and_unknown_units(sim_fleet: FleetHandle) -> None:
    out, status = run(sim_fleet, commands.unit_show(UNIT))
    props = dict(line.split("=", 1) for line in out.splitlines())
    assert status == 0
    # EnvironmentFiles= is an array: with no EnvironmentFile=, systemctl prints no line for it.
    assert set(props) == set(commands.UNIT_PROPERTIES) - {"EnvironmentFiles"}
    assert props["FragmentPath"] == f"/etc/systemd/system/{UNIT}"
    assert re.fullmatch(
        r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC",
        props["ActiveEnterTimestamp"],
    )

    out, status = run(sim_fleet, commands.unit_show("ghost.service"))
    assert status == 0
    assert out.splitlines() == [
        "MainPID=0",
        "Result=success",
        "NRestarts=0",
        "ExecMainStartTimestamp=",
        "ExecMainPID=0",
        "ExecMainCode=0",
        "ExecMainStatus=0",
        "ControlGroup=",
        "MemoryCurrent=[not set]",
        "MemoryPeak=[not set]",
        "CPUUsageNSec=[not set]",
        "TasksCurrent=[not set]",
        "Id=ghost.service",
        "LoadState=not-found",
        "ActiveState=inactive",
        "SubState=dead",
        "FragmentPath=",
        "DropInPaths=",
        "UnitFileState=",
        "ActiveEnterTimestamp=",
        "NeedDaemonReload=no",
    ]
    out, status = action(sim_fleet, "systemctl", "start", "--no-block", "ghost.service")
    assert (out, status) == ("Failed to start ghost.service: Unit ghost.service not found.\n", 5)
    out, status = run(sim_fleet, ["systemctl", "is-active", "ghost.service"])
    assert (out, status) == ("inactive\n", 3)
    out, status = run(sim_fleet, ["systemctl", "is-active", UNIT])
    assert (out, status) == ("active\n", 0)


def test_sha256sum_and_missing_file(sim_fleet: FleetHandle) -> None:
    out, status = run(sim_fleet, commands.unit_file_hash(UNIT))
    digest, path = out.rstrip("\n").split("  ")
    assert status == 0 and re.fullmatch(r"[0-9a-f]{64}", digest)
    assert path == f"/etc/systemd/system/{UNIT}"
    out, status = run(sim_fleet, commands.unit_file_hash("ghost.service"))
    assert status == 1
    assert out == "sha256sum: /etc/systemd/system/ghost.service: No such file or directory\n"


@pytest.mark.realtime
def test_swapping_the_model_loads_then_serves(sim_fleet: FleetHandle) -> None:
    qwen = catalog.unit_file_text(
        model_path="/models/Qwen/Qwen3-235B-A22B-FP8",
        served_name="qwen3-235b",
        max_model_len=40960,
        revision=2,
    )
    # Simulated seconds, which tests run 20 times faster (tests/fleet.TEST_TIME_SCALE): 20 s
    # is 1 s of real time, so the health check one SSH round trip after the restart finds the
    # model still loading. At 0.6 s (30 ms real) a slow round trip found it ready.
    sim_fleet.set_load_seconds(20)
    old_pid = sim_fleet.state("gpu-01")["units"][UNIT]["main_pid"]
    write_unit(sim_fleet, qwen)
    assert action(sim_fleet, *commands.daemon_reload()) == ("", 0)
    assert action(sim_fleet, *commands.unit_action("restart", UNIT)) == ("", 0)

    out, status = health(sim_fleet)
    assert status == 7
    assert out == (
        "curl: (7) Failed to connect to 127.0.0.1 port 8000 after 0 ms: "
        "Couldn't connect to server\n\n@@cp:http:000\n"
    )
    loading = sim_fleet.state("gpu-01")["units"][UNIT]
    assert loading["phase"] == "loading" and loading["main_pid"] not in (0, old_pid)
    assert loading["active_state"] == "active"

    sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=15)
    assert health(sim_fleet) == ("\n@@cp:http:200\n", 0)
    out, _ = run(sim_fleet, commands.http_get(8000, "/v1/models"))
    body = json.loads(out.split("\n@@cp:http:")[0])
    assert body["data"][0]["id"] == "qwen3-235b"
    assert body["data"][0]["max_model_len"] == 40960
    used = [int(line.split(", ")[3].split()[0]) for line in gpu_lines(sim_fleet)]
    assert used == [FULL] * 8
    assert "Application startup complete." in sim_fleet.journal("gpu-01")[-1]


def test_memory_grows_while_loading(make_fleet) -> None:
    fleet = make_fleet(1, load_seconds=2.0, time_scale=1.0)
    action(fleet, *commands.unit_action("restart", UNIT))
    samples = []
    for _ in range(5):
        samples.append(fleet.state("gpu-01")["gpus"][0]["memory_used_mib"])
        time.sleep(0.15)
    assert samples == sorted(samples) and samples[0] < samples[-1] < FULL
    fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    assert fleet.state("gpu-01")["gpus"][0]["memory_used_mib"] == FULL


def test_writing_without_daemon_reload_keeps_the_loaded_definition(sim_fleet: FleetHandle) -> None:
    write_unit(sim_fleet, catalog.unit_file_text(model_path="/models/moonshotai/Kimi-K2.5-INT4"))
    result = ssh(sim_fleet, "gpu-01", "sudo -n systemctl restart --no-block " + UNIT)
    assert "changed on disk. Run 'systemctl daemon-reload' to reload units." in result.stderr
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    assert unit["model_path"] == "/models/moonshotai/Kimi-K2.5-NVFP4"
    assert unit["need_daemon_reload"] is True
    out, _ = run(sim_fleet, ["systemctl", "show", UNIT, "-p", "NeedDaemonReload"])
    assert out == "NeedDaemonReload=yes\n"


def test_oversized_model_fails_with_cuda_oom(sim_fleet: FleetHandle) -> None:
    write_unit(sim_fleet, catalog.unit_file_text(model_path="/models/moonshotai/Kimi-K2.5-FP8"))
    action(sim_fleet, *commands.daemon_reload())
    action(sim_fleet, *commands.unit_action("restart", UNIT))
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "failed", timeout=5)
    assert (unit["active_state"], unit["sub_state"], unit["main_pid"]) == ("failed", "failed", 0)
    assert unit["n_restarts"] == 0

    out, status = run(sim_fleet, commands.unit_journal(UNIT, 60))
    assert status == 0
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in out
    assert out.splitlines()[-2:] == [
        f"{UNIT}: Main process exited, code=exited, status=1/FAILURE",
        f"{UNIT}: Failed with result 'exit-code'.",
    ]
    assert len(out.splitlines()) == 60
    assert health(sim_fleet)[1] == 7
    assert all(int(line.split(", ")[3].split()[0]) <= 5 for line in gpu_lines(sim_fleet))
    assert run(sim_fleet, commands.compute_apps_query()) == ("", 0)


def test_missing_model_path_fails_with_file_not_found(sim_fleet: FleetHandle) -> None:
    sim_fleet.set_disk_model("gpu-02", "/models/moonshotai/Kimi-K2.5-NVFP4", None)
    action(sim_fleet, *commands.unit_action("restart", UNIT), name="gpu-02")
    sim_fleet.wait_for_unit("gpu-02", UNIT, "failed", timeout=5)
    out, _ = run(sim_fleet, commands.unit_journal(UNIT, 20), name="gpu-02")
    assert "FileNotFoundError: [Errno 2] No such file or directory" in out


def test_stop_frees_memory_and_closes_the_port(sim_fleet: FleetHandle) -> None:
    assert action(sim_fleet, *commands.unit_action("stop", UNIT)) == ("", 0)
    out, _ = run(sim_fleet, commands.unit_show(UNIT))
    props = dict(line.split("=", 1) for line in out.splitlines())
    assert (props["ActiveState"], props["SubState"], props["MainPID"]) == ("inactive", "dead", "0")
    assert props["ActiveEnterTimestamp"] != ""  # systemd keeps the last activation time
    assert all(int(line.split(", ")[3].split()[0]) <= 5 for line in gpu_lines(sim_fleet))
    assert run(sim_fleet, commands.compute_apps_query()) == ("", 0)
    assert health(sim_fleet)[1] == 7
    out, _ = run(sim_fleet, commands.unit_journal(UNIT, 2))
    assert out.splitlines() == [
        f"{UNIT}: Deactivated successfully.",
        f"Stopped {UNIT} - vLLM server kimi-k2.5 (controlplane revision 1).",
    ]


def test_completions_are_coherent_and_check_the_model(sim_fleet: FleetHandle) -> None:
    body = json.dumps({"model": "kimi-k2.5", "prompt": "The capital of France is", "max_tokens": 8})
    out, status = run(sim_fleet, commands.completion_request(8000, body))
    payload, code = out.rsplit("\n@@cp:http:", 1)
    data = json.loads(payload)
    assert status == 0 and code == "200\n"
    assert data["object"] == "text_completion" and data["model"] == "kimi-k2.5"
    assert data["choices"][0]["text"].startswith(" Paris")
    assert data["choices"][0]["finish_reason"] == "length"
    assert data["usage"]["completion_tokens"] == 8

    body = json.dumps({"model": "gpt-4", "prompt": "hi"})
    out, _ = run(sim_fleet, commands.completion_request(8000, body))
    payload, code = out.rsplit("\n@@cp:http:", 1)
    assert code == "404\n"
    assert (
        json.loads(payload)["error"]["message"]
        == "The model `gpt-4` does not exist. Valid aliases: kimi-k2.5."
    )


def test_inflight_requests_show_in_metrics_and_gpus(sim_fleet: FleetHandle) -> None:
    sim_fleet.set_inflight("gpu-01", 12, 3)
    out, _ = run(sim_fleet, commands.http_get(8000, "/metrics"))
    assert 'vllm:num_requests_running{engine="0",model_name="kimi-k2.5"} 12.0' in out
    assert 'vllm:num_requests_waiting{engine="0",model_name="kimi-k2.5"} 3.0' in out
    assert "# TYPE vllm:kv_cache_usage_perc gauge" in out
    util = [int(line.split(", ")[7].split()[0]) for line in gpu_lines(sim_fleet)]
    assert all(u > 50 for u in util)


def test_integrity_check(sim_fleet: FleetHandle) -> None:
    argv = commands.integrity_check("/opt/vllm/.venv/bin/python3", "vllm")
    out, status = run(sim_fleet, argv)
    assert status == 0
    assert json.loads(out) == {
        "dist": "vllm",
        "version": "0.11.2",
        "checked": 1873,
        "modified": [],
        "missing": [],
        "added": [],
    }
    sim_fleet.set_integrity("gpu-01", missing=["vllm/__init__.py"], added=["vllm/evil.py"])
    report = json.loads(run(sim_fleet, argv)[0])
    assert report["missing"] == ["vllm/__init__.py"] and report["added"] == ["vllm/evil.py"]

    out, status = run(sim_fleet, commands.integrity_check("/opt/vllm/.venv/bin/python3", "nope"))
    assert (json.loads(out), status) == ({"error": "distribution not installed", "dist": "nope"}, 3)
    out, status = run(sim_fleet, commands.integrity_check("/opt/other/bin/python3", "vllm"))
    assert (out, status) == (
        "bash: line 1: /opt/other/bin/python3: No such file or directory\n",
        127,
    )


def test_tee_only_writes_unit_files(sim_fleet: FleetHandle) -> None:
    result = ssh(sim_fleet, "gpu-01", "sudo -n tee -- /etc/passwd", stdin="root::0:0::/:/bin/sh\n")
    assert result.exit_status == 1
    assert result.stderr == "tee: /etc/passwd: Permission denied\n"


def test_shell_status_and_lists(sim_fleet: FleetHandle) -> None:
    result = ssh(
        sim_fleet,
        "gpu-01",
        'false; echo a:"$?"\ntrue && echo b || echo c; nope 2>/dev/null; echo "$?"',
    )
    assert result.stdout == "a:1\nb\n127\n"
    result = ssh(sim_fleet, "gpu-01", "echo out; nope")
    assert (result.stdout, result.stderr) == ("out\n", "bash: line 1: nope: command not found\n")
    assert result.exit_status == 127


def test_a_non_root_user_needs_sudo(sim_fleet: FleetHandle) -> None:
    result = ssh(sim_fleet, "gpu-01", f"systemctl stop --no-block {UNIT}", username="deploy")
    assert result.exit_status == 1
    assert "Interactive authentication required." in result.stderr
    result = ssh(
        sim_fleet, "gpu-01", f"sudo -n systemctl stop --no-block {UNIT}", username="deploy"
    )
    assert result.exit_status == 0
    assert sim_fleet.state("gpu-01")["units"][UNIT]["active_state"] == "inactive"


def test_out_of_band_restart_changes_the_main_pid(sim_fleet: FleetHandle) -> None:
    before = sim_fleet.state("gpu-01")["units"][UNIT]["main_pid"]
    sim_fleet.restart_unit("gpu-01")
    after = sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    assert after["main_pid"] not in (0, before)
    assert sim_fleet.state("gpu-02")["units"][UNIT]["main_pid"] != after["main_pid"]


def test_restart_on_failure_counts_restarts_until_the_start_limit(sim_fleet: FleetHandle) -> None:
    text = catalog.unit_file_text(model_path="/models/moonshotai/Kimi-K2.5-FP8").replace(
        "Restart=no", "Restart=on-failure\nRestartSec=0.05"
    )
    sim_fleet.set_unit_file("gpu-01", UNIT, text, reload=True)
    sim_fleet.restart_unit("gpu-01")
    unit = sim_fleet.wait_for(
        "gpu-01", lambda s: s["units"][UNIT]["result"] == "start-limit-hit", timeout=10
    )["units"][UNIT]
    assert unit["active_state"] == "failed" and unit["n_restarts"] == 4


def test_host_keys_and_client_key_survive_a_restart(tmp_path) -> None:
    with running_fleet(2, state_dir=tmp_path) as first:
        keys = [first.host_public_key(n) for n in first.names]
        client = first.client_private_key
        assert len(set(keys)) == 2
    with running_fleet(2, state_dir=tmp_path) as second:
        assert [second.host_public_key(n) for n in second.names] == keys
        assert second.client_private_key == client
        assert ssh(second, "gpu-02", "hostname").stdout == "gpu-02\n"


@pytest.mark.parametrize("user", ["root", "anyone"])
def test_any_user_name_with_the_client_key_is_accepted(sim_fleet: FleetHandle, user: str) -> None:
    assert ssh(sim_fleet, "gpu-02", "whoami", username=user).stdout == f"{user}\n"


def test_reading_state_does_not_load_new_unit_files(sim_fleet: FleetHandle) -> None:
    first = catalog.unit_file_text(port=8001, served_name="first")
    sim_fleet.set_unit_file("gpu-01", "extra.service", first)
    assert sim_fleet.state("gpu-01")["units"]["extra.service"]["load_state"] == "loaded"
    second = catalog.unit_file_text(
        model_path="/models/Qwen/Qwen3-235B-A22B-FP8", served_name="second", port=8001
    )
    sim_fleet.set_unit_file("gpu-01", "extra.service", second)
    sim_fleet.stop_unit("gpu-01")
    sim_fleet.start_unit("gpu-01", "extra.service")  # first reference: systemd reads it now
    unit = sim_fleet.wait_for_unit("gpu-01", "extra.service", "ready", timeout=5)
    assert unit["served_name"] == "second"
