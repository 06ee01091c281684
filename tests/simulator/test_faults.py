"""Each fault a simulated host can be switched into, seen from a real SSH client."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import asyncssh
import pytest

from hosts import commands
from simulator import FAULTS, catalog
from tests.fleet import FleetHandle, ssh, ssh_connect

UNIT = catalog.DEFAULT_UNIT


def test_unreachable_refuses_connections_and_drops_open_ones(sim_fleet: FleetHandle) -> None:
    async def scenario() -> None:
        conn = await ssh_connect(sim_fleet, "gpu-01")
        assert (await conn.run("hostname")).stdout == "gpu-01\n"
        await asyncio.to_thread(sim_fleet.set_fault, "gpu-01", "unreachable")
        with pytest.raises((asyncssh.Error, OSError)):
            await conn.run("hostname", check=True)
        with pytest.raises(OSError):
            await ssh_connect(sim_fleet, "gpu-01")
        other = await ssh_connect(sim_fleet, "gpu-02")
        assert (await other.run("hostname")).stdout == "gpu-02\n"
        other.close()
        await asyncio.to_thread(sim_fleet.set_fault, "gpu-01", "unreachable", False)
        async with await ssh_connect(sim_fleet, "gpu-01") as again:
            assert (await again.run("hostname")).stdout == "gpu-01\n"

    asyncio.run(scenario())


def test_slow_delays_every_command(sim_fleet: FleetHandle) -> None:
    sim_fleet.set_slow_seconds(1.0, "gpu-01")
    sim_fleet.set_fault("gpu-01", "slow")
    started = time.monotonic()
    assert ssh(sim_fleet, "gpu-01", "echo ok").stdout == "ok\n"
    slow = time.monotonic() - started
    started = time.monotonic()
    ssh(sim_fleet, "gpu-02", "echo ok")
    fast = time.monotonic() - started
    assert slow >= 1.0 > fast


def test_host_key_rotation_presents_a_new_key(sim_fleet: FleetHandle) -> None:
    original = sim_fleet.host_public_key("gpu-01")
    sim_fleet.set_fault("gpu-01", "host_key_rotated")
    rotated = sim_fleet.presented_host_key("gpu-01")
    assert rotated != original

    async def presented() -> str:
        key = await asyncssh.get_server_host_key("127.0.0.1", sim_fleet.port("gpu-01"))
        assert key is not None
        return key.export_public_key("openssh").decode().strip()

    assert asyncio.run(presented()) == rotated
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        ssh(sim_fleet, "gpu-01", "hostname")  # trusts only the original key
    sim_fleet.set_fault("gpu-01", "host_key_rotated", False)
    assert asyncio.run(presented()) == original
    sim_fleet.set_fault("gpu-01", "host_key_rotated")
    assert asyncio.run(presented()) == rotated  # the rotated key is generated once and kept


def test_crash_on_start_fails_after_a_partial_load(make_fleet: Callable[..., FleetHandle]) -> None:
    # A load long enough (in simulated seconds) that the partial load is seen before the crash.
    sim_fleet = make_fleet(1, load_seconds=20)
    sim_fleet.set_fault("gpu-01", "crash_on_start")
    assert sim_fleet.state("gpu-01")["units"][UNIT]["phase"] == "ready"  # running ones keep running
    ssh(sim_fleet, "gpu-01", commands.join(commands.unit_action("restart", UNIT)))
    grown = sim_fleet.wait_for(
        "gpu-01", lambda s: s["gpus"][0]["memory_used_mib"] > 30000, timeout=5
    )
    assert grown["units"][UNIT]["phase"] == "failing"
    unit = sim_fleet.wait_for_unit("gpu-01", UNIT, "failed", timeout=5)
    assert unit["main_pid"] == 0
    journal = ssh(sim_fleet, "gpu-01", commands.join(commands.unit_journal(UNIT, 40))).stdout
    assert "RuntimeError: NCCL error: unhandled cuda error" in journal
    assert "EngineDeadError" in journal
    assert f"{UNIT}: Main process exited, code=exited, status=1/FAILURE" in journal


def test_incoherent_completions_miss_the_expected_word(sim_fleet: FleetHandle) -> None:
    sim_fleet.set_fault("gpu-01", "incoherent")
    body = json.dumps(
        {"model": "kimi-k2.5", "prompt": "The capital of France is", "max_tokens": 32}
    )
    out = ssh(sim_fleet, "gpu-01", commands.render(commands.completion_request(8000, body))).stdout
    text = json.loads(out.rsplit("\n@@cp:http:", 1)[0])["choices"][0]["text"]
    assert len(text.split()) >= 8 and "paris" not in text.lower()
    out = ssh(sim_fleet, "gpu-02", commands.render(commands.completion_request(8000, body))).stdout
    assert "Paris" in json.loads(out.rsplit("\n@@cp:http:", 1)[0])["choices"][0]["text"]


def test_patched_file_shows_in_the_integrity_report(sim_fleet: FleetHandle) -> None:
    sim_fleet.set_fault("gpu-02", "patched_file")
    argv = commands.integrity_check("/opt/vllm/.venv/bin/python3", "vllm")
    report = json.loads(ssh(sim_fleet, "gpu-02", commands.render(argv)).stdout)
    assert report["modified"] == ["vllm/model_executor/layers/fused_moe/fused_moe.py"]


def test_gpu_driver_error(sim_fleet: FleetHandle) -> None:
    sim_fleet.set_fault("gpu-01", "gpu_driver_error")
    result = ssh(sim_fleet, "gpu-01", commands.render(commands.gpu_query()))
    assert result.exit_status == 9
    assert result.stdout.startswith(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running."
    )


def test_simctl_switches_faults_and_load_over_ssh(sim_fleet: FleetHandle) -> None:
    result = ssh(sim_fleet, "gpu-02", "simctl fault incoherent on; simctl inflight 5 2")
    assert result.stdout == "gpu-02: fault incoherent on\ngpu-02: running 5, waiting 2\n"
    status = json.loads(ssh(sim_fleet, "gpu-02", "simctl status").stdout)
    assert status["faults"] == ["incoherent"]
    assert status["inflight"] == {"running": 5, "waiting": 2}
    assert ssh(sim_fleet, "gpu-02", "simctl fault nonsense on").exit_status == 2
    assert sim_fleet.faults("gpu-02") == {"incoherent"}


def test_simctl_can_make_a_host_unreachable(sim_fleet: FleetHandle) -> None:
    assert ssh(sim_fleet, "gpu-02", "simctl fault unreachable on").exit_status == 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            ssh(sim_fleet, "gpu-02", "true")
        except (OSError, asyncssh.Error):
            break  # refused, or cut off while the listener closed
        time.sleep(0.05)
    else:
        pytest.fail("gpu-02 still accepts connections")
    with pytest.raises(ConnectionRefusedError):
        ssh(sim_fleet, "gpu-02", "true")
    sim_fleet.set_fault("gpu-02", "unreachable", False)
    assert ssh(sim_fleet, "gpu-02", "hostname").stdout == "gpu-02\n"


def test_faults_can_be_set_at_start(make_fleet) -> None:
    fleet = make_fleet(3, faults={"gpu-03": ["gpu_driver_error", "patched_file"]})
    assert fleet.faults("gpu-03") == {"gpu_driver_error", "patched_file"}
    assert ssh(fleet, "gpu-03", "nvidia-smi -L").exit_status == 9
    assert ssh(fleet, "gpu-02", "nvidia-smi -L").exit_status == 0


def test_unknown_fault_is_refused(sim_fleet: FleetHandle) -> None:
    with pytest.raises(ValueError, match="unknown fault"):
        sim_fleet.set_fault("gpu-01", "meltdown")
    assert "unreachable" in FAULTS
