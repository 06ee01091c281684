"""Probes over real SSH to the simulator: what is stored matches what the host really does."""

from __future__ import annotations

import io
import json

import asyncssh
import pytest
from django.core.management import CommandError, call_command

from controlplane.audit.models import AuditEvent
from hosts import services
from hosts.choices import HostKeyStatus, SnapshotStatus
from hosts.models import Host
from tests.fleet import register, ssh

pytestmark = pytest.mark.django_db
UNIT = "vllm-kimi-k25.service"


def probe(host: Host, **kwargs):
    host = Host.objects.select_related("credential").get(pk=host.pk)
    return services.host_probe(host=host, trigger="manual", **kwargs)


def test_a_healthy_host_is_stored_exactly_as_the_simulator_has_it(registered_fleet):
    host = registered_fleet.host("gpu-01")
    snapshot = probe(host)
    truth = registered_fleet.state("gpu-01")
    assert snapshot.status == SnapshotStatus.OK, snapshot.error
    gpus = snapshot.parsed["gpus"]
    assert len(gpus) == 8
    for seen, real in zip(gpus, truth["gpus"], strict=True):
        for key in ("index", "uuid", "name", "memory_used_mib", "memory_total_mib"):
            assert seen[key] == real[key]
        assert seen["power_limit_w"] == real["power_limit_w"]
        assert seen["power_draw_w"] == pytest.approx(real["power_draw_w"], abs=0.2)
    dep = snapshot.parsed["deployments"][UNIT]
    unit_truth = truth["units"][UNIT]
    assert dep["unit"]["active_state"] == unit_truth["active_state"] == "active"
    assert dep["unit"]["main_pid"] == unit_truth["main_pid"]
    assert dep["server"]["healthy"] is True
    assert dep["server"]["models"] == truth["models"] == ["kimi-k2.5"]
    path = f"/etc/systemd/system/{UNIT}"
    assert dep["unit_file_sha256"] == truth["unit_files"][path]["sha256"]
    assert [a["pid"] for a in snapshot.parsed["compute_apps"]] == [
        a["pid"] for a in truth["compute_apps"]
    ]
    assert len(snapshot.digest) == 64
    event = AuditEvent.objects.get(action="probe.completed")
    assert (event.snapshot_id, event.snapshot_digest) == (snapshot.pk, snapshot.digest)


def test_in_flight_requests_are_read_from_the_servers_metrics(registered_fleet):
    registered_fleet.set_inflight("gpu-01", 3, 2)
    snapshot = probe(registered_fleet.host("gpu-01"))
    server = snapshot.parsed["deployments"][UNIT]["server"]
    assert (server["requests_running"], server["requests_waiting"]) == (3, 2)


def test_an_unreachable_host_gives_an_unreachable_snapshot(registered_fleet):
    registered_fleet.set_fault("gpu-02", "unreachable")
    snapshot = probe(registered_fleet.host("gpu-02"))
    assert snapshot.status == SnapshotStatus.UNREACHABLE
    assert snapshot.parsed == {}


def test_a_slow_host_times_out_as_an_error(registered_fleet, settings):
    settings.SSH_COMMAND_TIMEOUT = 0.5
    registered_fleet.set_slow_seconds(3, "gpu-01")
    registered_fleet.set_fault("gpu-01", "slow")
    snapshot = probe(registered_fleet.host("gpu-01"))
    assert snapshot.status == SnapshotStatus.ERROR
    assert "timed out" in snapshot.error


def test_a_driver_failure_makes_a_partial_snapshot(registered_fleet):
    registered_fleet.set_fault("gpu-01", "gpu_driver_error")
    snapshot = probe(registered_fleet.host("gpu-01"))
    assert snapshot.status == SnapshotStatus.PARTIAL
    assert "couldn't communicate with the NVIDIA driver" in snapshot.error
    assert snapshot.parsed["deployments"][UNIT]["server"]["healthy"] is True


def test_a_patched_engine_file_shows_in_the_integrity_check(registered_fleet):
    registered_fleet.set_fault("gpu-01", "patched_file")
    snapshot = probe(registered_fleet.host("gpu-01"), integrity=True)
    report = snapshot.parsed["deployments"][UNIT]["integrity"]
    assert snapshot.includes_integrity
    assert "vllm/model_executor/layers/fused_moe/fused_moe.py" in report["modified"]
    clean = probe(registered_fleet.host("gpu-02"), integrity=True)
    assert clean.parsed["deployments"][UNIT]["integrity"]["modified"] == []


def test_a_changed_host_key_blocks_the_probe_and_every_later_one(registered_fleet):
    host = registered_fleet.host("gpu-01")
    registered_fleet.set_fault("gpu-01", "host_key_rotated")
    first = probe(host)
    assert first.status == SnapshotStatus.HOST_KEY_MISMATCH
    host.refresh_from_db()
    assert host.host_key_status == HostKeyStatus.CHANGED
    assert host.presented_host_key == registered_fleet.presented_host_key("gpu-01")
    assert AuditEvent.objects.filter(action="host.key_changed", host_id=host.pk).exists()
    # Even with the old key back, nothing is sent until an admin accepts a key.
    registered_fleet.set_fault("gpu-01", "host_key_rotated", on=False)
    registered_fleet.clear_command_log("gpu-01")
    second = probe(host)
    assert second.status == SnapshotStatus.HOST_KEY_MISMATCH
    assert registered_fleet.command_log("gpu-01") == []


def test_an_unknown_host_key_waits_for_acceptance(registered_fleet, admin_user):
    host = registered_fleet.host("gpu-02")
    Host.objects.filter(pk=host.pk).update(host_key="", host_key_status=HostKeyStatus.UNKNOWN)
    snapshot = probe(host)
    assert snapshot.status == SnapshotStatus.HOST_KEY_UNKNOWN
    host.refresh_from_db()
    presented = registered_fleet.host_public_key("gpu-02")
    assert host.presented_host_key == presented
    services.host_key_accept(
        host=host,
        actor=admin_user,
        reason="checked on the console",
        reviewed_fingerprint=host.presented_key_fingerprint,
    )
    assert probe(host).status == SnapshotStatus.OK


def test_a_wrong_client_key_is_an_authentication_failure(registered_fleet):
    other = asyncssh.generate_private_key("ssh-ed25519").export_private_key().decode()
    credential = services.credential_create(name="wrong", private_key=other)
    host = registered_fleet.host("gpu-01")
    Host.objects.filter(pk=host.pk).update(credential=credential)
    assert probe(host).status == SnapshotStatus.AUTH_FAILED


def test_probing_many_hosts_keeps_their_order_and_statuses(registered_fleet):
    registered_fleet.set_fault("gpu-02", "unreachable")
    hosts = list(Host.objects.select_related("credential").order_by("name"))
    snapshots = services.hosts_probe(hosts=hosts, trigger="schedule")
    assert [(s.host.name, s.status) for s in snapshots] == [
        ("gpu-01", "ok"),
        ("gpu-02", "unreachable"),
    ]


def test_the_probe_command_prints_json(registered_fleet):
    out = io.StringIO()
    call_command("probe", "gpu-01", "gpu-02", "--json", stdout=out)
    rows = json.loads(out.getvalue())
    assert [(r["host"], r["status"]) for r in rows] == [("gpu-01", "ok"), ("gpu-02", "ok")]
    assert rows[0]["material_fingerprint"]["gpu_count"] == 8
    assert AuditEvent.objects.filter(action="probe.completed", actor="system:cli").count() == 2


def test_the_probe_command_names_unknown_hosts(registered_fleet):
    with pytest.raises(CommandError, match="unknown host"):
        call_command("probe", "gpu-99")


def test_add_host_pins_the_key_the_host_presents(sim_fleet, db, tmp_path):
    key_file = tmp_path / "id_ed25519"
    key_file.write_text(sim_fleet.client_private_key)
    out = io.StringIO()
    call_command(
        "add_host", "gpu-new", "--address", "127.0.0.1", "--port", str(sim_fleet.port("gpu-01")),
        "--key-file", str(key_file), "--sudo", "--accept-host-key", stdout=out,
    )  # fmt: skip
    host = Host.objects.get(name="gpu-new")
    assert host.host_key == sim_fleet.host_public_key("gpu-01")
    assert host.host_key_status == HostKeyStatus.PINNED and host.use_sudo
    event = AuditEvent.objects.get(action="host.key_accepted")
    assert event.actor == "system:cli"
    assert sim_fleet.client_private_key not in json.dumps(list(AuditEvent.objects.values("data")))
    assert probe(host).status == SnapshotStatus.OK


def test_add_host_refuses_bad_input_clearly(db, tmp_path):
    with pytest.raises(CommandError, match="address"):
        call_command("add_host", "gpu-x", "--address", "bad host;reboot")
    with pytest.raises(CommandError, match="cannot read"):
        call_command("add_host", "gpu-y", "--address", "10.0.0.1", "--key-file", "/nonexistent")
    bad_key = tmp_path / "key"
    bad_key.write_text("not a key")
    with pytest.raises(CommandError, match="Not a usable SSH private key"):
        call_command("add_host", "gpu-z", "--address", "10.0.0.1", "--key-file", str(bad_key))
    assert not Host.objects.exists()


def test_hostile_names_reach_the_host_as_inert_arguments(sim_fleet):
    """The simulator logs the exact command lines it receives."""
    from hosts import commands

    hostile = "x;reboot $(id) `id`\n'\"".replace("\n", "")
    line = commands.join(["systemctl", "show", hostile])
    result = ssh(sim_fleet, "gpu-01", line)
    assert sim_fleet.command_log("gpu-01")[-1] == line
    assert result.exit_status == 0
    assert "LoadState=not-found" in result.stdout
    # systemd escapes the whole string as one unit name: one literal argument, nothing evaluated
    assert r"x\x3breboot\x20\x24\x28id\x29\x20\x60id\x60" in result.stdout + result.stderr


def test_registration_is_idempotent(make_fleet, db):
    fleet = make_fleet(2)
    register(fleet)
    register(fleet)
    assert Host.objects.count() == 2
    assert {h.host_key for h in Host.objects.all()} == {
        fleet.host_public_key("gpu-01"),
        fleet.host_public_key("gpu-02"),
    }
