"""`simfleet --register`: the rows it creates, and that running it again changes nothing."""

from __future__ import annotations

import dataclasses

import asyncssh
import pytest

from controlplane.audit.models import AuditEvent
from deployments.models import Deployment, ModelArtifact
from deployments.simfleet_registration import register_fleet
from hosts.choices import HostKeyStatus
from hosts.models import Credential, Host
from simulator import CATALOG
from tests.fleet import RegisteredFleet, ssh

pytestmark = pytest.mark.django_db


def _counts() -> dict[str, int]:
    return {
        "hosts": Host.objects.count(),
        "credentials": Credential.objects.count(),
        "artifacts": ModelArtifact.objects.count(),
        "deployments": Deployment.objects.count(),
        "audit": AuditEvent.objects.count(),
    }


def test_registration_creates_hosts_keys_catalog_and_deployments(
    registered_fleet: RegisteredFleet,
) -> None:
    fleet = registered_fleet.fleet
    assert [h.name for h in registered_fleet.hosts] == ["gpu-01", "gpu-02"]
    for host in Host.objects.order_by("name"):
        assert (host.address, host.port) == ("127.0.0.1", fleet.port(host.name))
        assert (host.username, host.use_sudo) == ("root", True)
        assert host.host_key == fleet.host_public_key(host.name)
        assert host.host_key_status == HostKeyStatus.PINNED
        assert host.credential is not None and host.credential.name == "simfleet"
    credential = Credential.objects.get(name="simfleet")
    client = asyncssh.import_private_key(fleet.client_private_key)
    assert credential.fingerprint == client.get_fingerprint("sha256")
    stored = asyncssh.import_private_key(credential.private_key())
    assert stored.public_data == client.public_data

    assert ModelArtifact.objects.count() == len(CATALOG)
    nvfp4 = ModelArtifact.objects.get(name="moonshotai/Kimi-K2.5", variant="NVFP4")
    assert (nvfp4.weights_gib, nvfp4.served_name) == (595, "kimi-k2.5")
    assert nvfp4.path == "/models/moonshotai/Kimi-K2.5-NVFP4"
    deployments = list(Deployment.objects.order_by("host__name"))
    assert [(d.unit, d.port, d.model_id, d.tensor_parallel_size) for d in deployments] == [
        ("vllm-kimi-k25.service", 8000, nvfp4.pk, 8)
    ] * 2
    accepted = AuditEvent.objects.filter(action="host.key_accepted")
    assert accepted.count() == 2
    assert set(AuditEvent.objects.values_list("actor", flat=True)) == {"system:cli"}


def test_registration_is_idempotent(registered_fleet: RegisteredFleet) -> None:
    fleet = registered_fleet.fleet
    before = _counts()
    register_fleet(fleet.registration_info(), client_private_key=fleet.client_private_key)
    assert _counts() == before


def test_registration_updates_ports_and_repins_changed_keys(
    registered_fleet: RegisteredFleet,
) -> None:
    fleet = registered_fleet.fleet
    before = _counts()
    new_key = asyncssh.generate_private_key("ssh-ed25519")
    new_key_text = new_key.export_public_key("openssh").decode().strip()
    infos = fleet.registration_info()
    moved = [
        dataclasses.replace(infos[0], port=infos[0].port + 1000),
        dataclasses.replace(infos[1], public_key=new_key_text),
    ]
    register_fleet(moved, client_private_key=fleet.client_private_key)
    gpu1, gpu2 = Host.objects.get(name="gpu-01"), Host.objects.get(name="gpu-02")
    assert gpu1.port == infos[0].port + 1000 and gpu1.host_key == infos[0].public_key
    assert gpu2.host_key == " ".join(new_key_text.split()[:2])
    assert _counts() == {**before, "audit": before["audit"] + 2}  # nothing duplicated
    latest = AuditEvent.objects.order_by("-seq")[:2]
    assert sorted(e.action for e in latest) == ["host.changed", "host.key_accepted"]
    assert {e.actor for e in latest} == {"system:cli"}


def test_registered_host_rows_reach_the_simulator(registered_fleet: RegisteredFleet) -> None:
    host = registered_fleet.host("gpu-02")
    fleet = registered_fleet.fleet
    assert fleet.port(host.name) == host.port
    assert ssh(fleet, host.name, "hostname").stdout == "gpu-02\n"
