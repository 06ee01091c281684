"""What each SSH client asked of a simulated host: the keys it offered, the forwarding it wanted,
recorded even though the host refuses every kind of forwarding."""

from __future__ import annotations

import asyncio

import asyncssh
import pytest

from tests.fleet import FleetHandle, ssh


def connect(fleet: FleetHandle, **options: object) -> asyncssh.SSHClientConnection:
    base: dict[str, object] = {
        "username": "root",
        "client_keys": [asyncssh.import_private_key(fleet.client_private_key)],
        "known_hosts": ([asyncssh.import_public_key(fleet.host_public_key("gpu-01"))], [], []),
        "agent_path": None,
        "config": None,
    }
    return asyncssh.connect(fleet.address, fleet.port("gpu-01"), **{**base, **options})


def test_a_plain_connection_offers_its_key_and_asks_for_nothing(sim_fleet: FleetHandle) -> None:
    assert ssh(sim_fleet, "gpu-01", "echo hi").stdout == "hi\n"
    assert ssh(sim_fleet, "gpu-01", "echo hi", username="deploy").exit_status == 0
    first, second = sim_fleet.connection_log("gpu-01")
    assert first.username == "root" and second.username == "deploy"
    assert first.offered_keys == [sim_fleet.client_public_key]
    assert not first.forwarding_requested
    assert sim_fleet.connection_log("gpu-02") == []
    sim_fleet.clear_connection_log()
    assert sim_fleet.connection_log("gpu-01") == []


def test_every_key_offered_is_recorded_in_order(sim_fleet: FleetHandle) -> None:
    stranger = asyncssh.generate_private_key("ssh-ed25519")
    ours = asyncssh.import_private_key(sim_fleet.client_private_key)

    async def go() -> None:
        async with connect(sim_fleet, client_keys=[stranger, ours]) as conn:
            await conn.run("true")

    asyncio.run(go())
    (record,) = sim_fleet.connection_log("gpu-01")
    stranger_text = stranger.export_public_key("openssh").decode().strip()
    assert record.offered_keys == [stranger_text, sim_fleet.client_public_key]


def test_forwarding_requests_are_recorded_though_refused(sim_fleet: FleetHandle) -> None:
    async def go() -> str:
        async with connect(
            sim_fleet,
            agent_forwarding="/nonexistent/agent.sock",
            x11_forwarding="ignore_failure",
            x11_display="localhost:10",
        ) as conn:
            result = await conn.run("echo still served", check=False)
            with pytest.raises(asyncssh.ChannelOpenError):
                await conn.create_connection(asyncssh.SSHTCPSession, "127.0.0.1", 8000)
            with pytest.raises(asyncssh.ChannelListenError):
                await conn.forward_remote_port("127.0.0.1", 0, "127.0.0.1", 9)
            return str(result.stdout)

    assert asyncio.run(go()) == "still served\n"
    (record,) = sim_fleet.connection_log("gpu-01")
    assert record.agent_forwarding and record.x11_forwarding
    assert record.port_forwarding == ["connect 127.0.0.1:8000", "listen 127.0.0.1:0"]
    assert record.forwarding_requested
