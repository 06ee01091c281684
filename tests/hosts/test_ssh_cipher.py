"""The cipher the control plane's SSH client settles on with a host that allows what OpenSSH
allows by default (the simulator offers sshd's default list): AES-GCM, never ChaCha20-Poly1305,
which asyncssh would pick first and which costs it several times the CPU a packet."""

from __future__ import annotations

import asyncssh
import pytest

from hosts import commands
from hosts import services as host_services
from hosts.models import Host
from hosts.ssh import ENCRYPTION_ALGS
from simulator import catalog
from tests.fleet import RegisteredFleet, register, ssh

pytestmark = pytest.mark.integration


@pytest.fixture
def fleet(db: None, make_fleet) -> RegisteredFleet:
    return register(make_fleet(1))


def test_probes_and_job_commands_use_aes_gcm(fleet: RegisteredFleet) -> None:
    host = Host.objects.select_related("credential").get(pk=fleet.host("gpu-01").pk)
    assert host_services.host_probe(host=host, trigger="manual").status == "ok"
    argv = commands.unit_action("restart", catalog.DEFAULT_UNIT)
    assert host_services.host_run(host=host, argv=argv).exit_status == 0
    records = fleet.connection_log("gpu-01")
    assert records and {r.cipher for r in records} == {"aes128-gcm@openssh.com"}


def test_the_host_offers_what_asyncssh_would_pick_first(fleet: RegisteredFleet) -> None:
    """Without the client's own order, the same host settles on ChaCha20-Poly1305."""
    assert ssh(fleet.fleet, "gpu-01", "true").exit_status == 0  # asyncssh's default ciphers
    (record,) = fleet.connection_log("gpu-01")
    assert record.cipher == "chacha20-poly1305@openssh.com"


def test_every_cipher_asyncssh_allows_is_still_allowed() -> None:
    """A host restricted to any of them (ChaCha20 or CTR only) is still reached."""
    defaults = [alg.decode() for alg in asyncssh.encryption.get_default_encryption_algs()]
    assert ENCRYPTION_ALGS[0] == "aes128-gcm@openssh.com"
    assert sorted(ENCRYPTION_ALGS) == sorted(defaults)
