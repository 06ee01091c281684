"""What the control plane's SSH client offers a host: the host's own credential and nothing else.

Checked on the host's side (the simulator records, per connection, every key offered and every
agent, X11 or port forwarding request, though it refuses all forwarding): no ssh-agent key and
no ~/.ssh key of the worker's account is offered, even when both are there for the taking, and
nothing the worker holds is lent to the host.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from hosts import commands
from hosts import services as host_services
from hosts.models import Host
from simulator import catalog
from tests.fleet import RegisteredFleet, register

pytestmark = pytest.mark.integration


def fingerprint(public_key: str) -> str:
    return str(asyncssh.import_public_key(public_key).get_fingerprint())


def offered(fleet: RegisteredFleet, name: str = "gpu-01") -> list[list[str]]:
    """Per connection the host saw, the fingerprints of the keys offered, in order."""
    return [[fingerprint(k) for k in r.offered_keys] for r in fleet.connection_log(name)]


def probe_and_restart(host: Host) -> None:
    """A probe, then a change job's command, each through the product's own path."""
    host = Host.objects.select_related("credential").get(pk=host.pk)
    snapshot = host_services.host_probe(host=host, trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    argv = commands.unit_action("restart", catalog.DEFAULT_UNIT)
    assert host_services.host_run(host=host, argv=argv).exit_status == 0


@pytest.fixture
def fleet(db: None, make_fleet) -> RegisteredFleet:
    return register(make_fleet(1))


@pytest.fixture
def tempting_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The worker's account as a careless one looks: an ssh-agent holding a key (SSH_AUTH_SOCK
    set), a key and a config asking for agent and X11 forwarding in ~/.ssh. Yields the
    fingerprints of the two keys that must never be offered."""
    agent_binary = shutil.which("ssh-agent")
    if agent_binary is None:
        pytest.skip("ssh-agent is not installed")
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen([agent_binary, "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        in_agent = asyncssh.generate_private_key("ssh-ed25519", comment="agent-key@worker")

        async def add() -> None:
            deadline = time.monotonic() + 10
            while True:  # waiting for a process to listen, not controlling time
                try:
                    async with asyncssh.connect_agent(str(sock)) as client:
                        await client.add_keys([in_agent])
                        return
                except OSError:
                    assert agent.poll() is None and time.monotonic() < deadline, "no ssh-agent"
                    await asyncio.sleep(0.02)

        asyncio.run(add())
        home = tmp_path / "home"
        (home / ".ssh").mkdir(parents=True)
        on_disk = asyncssh.generate_private_key("ssh-ed25519", comment="someone-else@worker")
        on_disk.write_private_key(home / ".ssh" / "id_ed25519")
        (home / ".ssh" / "id_ed25519").chmod(0o600)
        (home / ".ssh" / "config").write_text(
            "Host *\n  ForwardAgent yes\n  ForwardX11 yes\n  IdentityFile ~/.ssh/id_ed25519\n"
        )
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("DISPLAY", "localhost:10")
        yield [in_agent.get_fingerprint(), on_disk.get_fingerprint()]
    finally:
        agent.terminate()
        agent.wait(10)


def test_a_probe_and_a_job_command_offer_one_key_and_ask_for_no_forwarding(
    fleet: RegisteredFleet,
) -> None:
    host = fleet.host("gpu-01")
    probe_and_restart(host)
    records = fleet.connection_log("gpu-01")
    assert records, "the host saw no connection"
    credential = fingerprint(fleet.credential.public_key)
    assert offered(fleet) == [[credential]] * len(records)
    assert [(r.username, r.forwarding_requested) for r in records] == [("root", False)] * len(
        records
    )


def test_an_agent_and_keys_in_home_are_left_alone(
    fleet: RegisteredFleet, tempting_worker: list[str]
) -> None:
    # The temptation is real: a client on asyncssh's defaults takes the agent's key first.
    async def defaults() -> None:
        key = asyncssh.import_private_key(fleet.client_private_key)
        async with asyncssh.connect(
            fleet.address, fleet.port("gpu-01"), username="root", client_keys=[key],
            known_hosts=None, agent_forwarding=True,
        ) as conn:  # fmt: skip
            await conn.run("true")

    asyncio.run(defaults())
    (careless,) = fleet.connection_log("gpu-01")
    assert tempting_worker[0] in [fingerprint(k) for k in careless.offered_keys]
    assert careless.agent_forwarding
    fleet.clear_connection_log()

    probe_and_restart(fleet.host("gpu-01"))
    credential = fingerprint(fleet.credential.public_key)
    records = fleet.connection_log("gpu-01")
    assert records and offered(fleet) == [[credential]] * len(records)
    assert not any(r.forwarding_requested for r in records)


def test_a_host_that_refuses_the_key_still_sees_only_that_key(
    fleet: RegisteredFleet, tempting_worker: list[str]
) -> None:
    """Had the host accepted the credential, a client would never try another key; here it
    refuses it, so every key the client would fall back to is offered, and none is."""
    stranger = asyncssh.generate_private_key("ssh-ed25519")
    credential = host_services.credential_create(
        name="not-authorised", private_key=stranger.export_private_key().decode()
    )
    Host.objects.filter(pk=fleet.host("gpu-01").pk).update(credential=credential)
    host = Host.objects.select_related("credential").get(name="gpu-01")
    snapshot = host_services.host_probe(host=host, trigger="manual")
    assert snapshot.status == "auth_failed"
    assert offered(fleet) == [[stranger.get_fingerprint()]]
    assert not set(tempting_worker) & {k for keys in offered(fleet) for k in keys}
    assert os.environ["SSH_AUTH_SOCK"]  # the agent was there all along
