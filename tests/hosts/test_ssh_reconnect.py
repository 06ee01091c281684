"""A pooled connection that dies: read-only commands (probes) are sent again on a new
connection; a command that changes the host is not, once it may have reached the host (a
second `systemctl restart` would be a second restart). Real SSH to the simulator."""

from __future__ import annotations

import asyncio

import pytest

from hosts.ssh import ConnectionPool, SSHFailure, SSHTarget

RESTART = "systemctl restart --no-block vllm-kimi-k25.service"


def target(fleet) -> SSHTarget:
    return SSHTarget(
        address=fleet.address, port=fleet.port("gpu-01"), username="root",
        private_key=fleet.client_private_key, pinned_key=fleet.host_public_key("gpu-01"),
    )  # fmt: skip


async def lose_connection_during(fleet, pool: ConnectionPool, command: str, read_only: bool):
    """Warm the pool, then drop the host's connections while `command` runs on it."""
    await pool.run(target(fleet), "true", connect_timeout=5, command_timeout=5)
    fleet.set_slow_seconds(1.0, "gpu-01")
    fleet.set_fault("gpu-01", "slow")
    running = asyncio.ensure_future(
        pool.run(target(fleet), command, connect_timeout=5, command_timeout=10, read_only=read_only)
    )
    await asyncio.sleep(0.4)  # the host has the command and sleeps on it
    fleet.set_fault("gpu-01", "unreachable")  # drops every open connection
    fleet.set_fault("gpu-01", "slow", on=False)
    fleet.set_fault("gpu-01", "unreachable", on=False)  # and listens again at once
    try:
        return await running
    finally:
        await pool.close_all()


def test_a_change_command_is_not_sent_twice_when_the_connection_is_lost(sim_fleet):
    with pytest.raises(SSHFailure) as failure:
        asyncio.run(lose_connection_during(sim_fleet, ConnectionPool(), RESTART, read_only=False))
    assert failure.value.kind == "unreachable"
    assert sim_fleet.command_log("gpu-01").count(RESTART) == 1


def test_a_read_only_command_is_sent_again_on_a_new_connection(sim_fleet):
    result = asyncio.run(
        lose_connection_during(sim_fleet, ConnectionPool(), "echo probe", read_only=True)
    )
    assert result.stdout == "probe\n"
    assert sim_fleet.command_log("gpu-01").count("echo probe") == 2


def test_a_dead_idle_connection_is_replaced_for_any_command(sim_fleet):
    async def go():
        pool = ConnectionPool()
        await pool.run(target(sim_fleet), "true", connect_timeout=5, command_timeout=5)
        sim_fleet.set_fault("gpu-01", "unreachable")  # the host went away while idle...
        sim_fleet.set_fault("gpu-01", "unreachable", on=False)  # ...and came back
        try:
            return await pool.run(
                target(sim_fleet), RESTART, connect_timeout=5, command_timeout=5, read_only=False
            )
        finally:
            await pool.close_all()

    assert asyncio.run(go()).exit_status == 0
    assert sim_fleet.command_log("gpu-01").count(RESTART) == 1
