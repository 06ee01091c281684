"""Probes over real SSH of a host whose unit reads an environment file with a secret, the
probe spec that the last snapshot informs, and reading a journal for a viewer."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from hosts import services
from hosts.choices import SnapshotStatus
from hosts.models import Host, SnapshotBlob, StateSnapshot
from hosts.services.probe_spec import JOURNAL_PROBE_LINES
from hosts.state import fingerprint_drift
from simulator import catalog
from tests.fleet import FleetHandle, RegisteredFleet, register

pytestmark = pytest.mark.django_db
UNIT = catalog.DEFAULT_UNIT
DROP_IN = f"/etc/systemd/system/{UNIT}.d/override.conf"


@pytest.fixture
def envfile_fleet(db: None, make_fleet: Callable[..., FleetHandle]) -> RegisteredFleet:
    """gpu-01 runs the hand-written unit (model and HF_TOKEN from an env file); gpu-02 not."""
    return register(make_fleet(2, unit_styles={"gpu-01": "envfile"}))


def probe(host: Host) -> StateSnapshot:
    host = Host.objects.select_related("credential").get(pk=host.pk)
    return services.host_probe(host=host, trigger="manual")


def stored_text(snapshot: StateSnapshot) -> str:
    """Everything the database keeps of a snapshot, as text (its raw output is in blobs and in
    its packed sections, compressed: decompressed here, else a secret would not show)."""
    row = StateSnapshot.objects.values("raw_index", "parsed", "error", "digest").get(pk=snapshot.pk)
    blobs = SnapshotBlob.objects.filter(pk__in=row["raw_index"].values())
    sections = [blob.as_section() for blob in blobs]
    packed = StateSnapshot.objects.get(pk=snapshot.pk).raw
    return json.dumps([row, sections, packed])


def test_a_secret_in_an_environment_file_is_stored_nowhere(envfile_fleet: RegisteredFleet) -> None:
    host = envfile_fleet.host("gpu-01")

    first, second = probe(host), probe(host)

    for snapshot in (first, second):
        assert catalog.FAKE_HF_TOKEN not in stored_text(snapshot)
    raw = StateSnapshot.objects.get(pk=second.pk).raw
    assert raw[f"envfile:{UNIT}:{catalog.ENV_FILE}"]["output"].endswith("HF_TOKEN=<redacted>\n")
    env = second.state().deployments[UNIT].environment_files[0]
    assert env.variables["HF_TOKEN"] == "<redacted>"
    assert env.variables["MODEL"] == "nvidia/Kimi-K2.5-NVFP4"
    events = AuditEvent.objects.filter(snapshot_id__in=[first.pk, second.pk])
    assert catalog.FAKE_HF_TOKEN not in json.dumps(list(events.values("data")))


def test_the_first_probe_reads_the_env_files_the_unit_names(
    envfile_fleet: RegisteredFleet,
) -> None:
    """The unit names its environment file; the probe reads it in the same probe (a second pass
    over SSH), and later probes read it in their first pass."""
    host = envfile_fleet.host("gpu-01")

    second = probe(host)
    spec = services.probe_spec_for(Host.objects.get(pk=host.pk), integrity=False)

    assert second.status == SnapshotStatus.OK, second.error
    assert f"envfile:{UNIT}:{catalog.ENV_FILE}" in second.raw
    assert spec.servers[0].environment_files == (catalog.ENV_FILE,)
    truth = envfile_fleet.state("gpu-01")
    (env,) = second.state().deployments[UNIT].environment_files
    assert env.sha256 == truth["unit_files"][catalog.ENV_FILE]["sha256"]
    dep = second.state().deployments[UNIT]
    assert dep.server.model_roots == ["nvidia/Kimi-K2.5-NVFP4"]
    assert dep.unit.memory_current_bytes == truth["units"][UNIT]["memory_current_bytes"]
    assert second.state().topology is not None and second.state().cuda_version == "13.0"


def test_a_rotated_secret_and_a_new_drop_in_are_drift(envfile_fleet: RegisteredFleet) -> None:
    host = envfile_fleet.host("gpu-01")
    probe(host)
    before = probe(host)

    envfile_fleet.write_file("gpu-01", catalog.ENV_FILE, catalog.envfile_text(hf_token="hf_new"))
    envfile_fleet.write_file("gpu-01", DROP_IN, "[Service]\nEnvironment=VLLM_LOGGING_LEVEL=DEBUG\n")
    envfile_fleet.daemon_reload("gpu-01")
    after = probe(host)

    drift = fingerprint_drift(before.material_fingerprint(), after.material_fingerprint())
    fields = {d["field"] for d in drift}
    assert {f"{UNIT}.environment_files", f"{UNIT}.drop_ins"} <= fields
    assert "hf_new" not in stored_text(after)


def test_a_unit_seen_failing_gets_its_journal_in_the_next_probe(
    registered_fleet: RegisteredFleet,
) -> None:
    host = registered_fleet.host("gpu-01")
    registered_fleet.crash_unit("gpu-01")
    failed = probe(host)
    assert failed.state().unit_state(UNIT).active_state == "failed"

    spec = services.probe_spec_for(Host.objects.get(pk=host.pk), integrity=False)
    assert spec.servers[0].journal_lines == JOURNAL_PROBE_LINES
    journal = probe(host).state().deployments[UNIT].journal

    assert journal is not None and 0 < len(journal) <= JOURNAL_PROBE_LINES
    assert "Failed with result 'exit-code'." in journal[-1]
    healthy = services.probe_spec_for(Host.objects.get(name="gpu-02"), integrity=False)
    assert healthy.servers[0].journal_lines == 0


def test_a_viewer_reads_a_units_journal_and_it_is_audited(
    registered_fleet: RegisteredFleet, viewer: object
) -> None:
    host = registered_fleet.host("gpu-01")

    lines = services.host_journal(host=host, unit=UNIT, lines=5, user=viewer)

    assert len(lines) == 5 and all(line.startswith("20") for line in lines)
    assert lines[-1].endswith("Application startup complete.")
    event = AuditEvent.objects.get(action=AuditAction.HOST_JOURNAL_READ)
    assert event.host_id == host.pk and event.data == {"unit": UNIT, "lines": 5, "returned": 5}
    assert registered_fleet.command_log("gpu-01")[-1] == (
        f"sudo -n journalctl -u {UNIT} -n 5 --no-pager -o short-iso 2>&1"
    )


def test_the_journal_button_refuses_what_it_must(
    registered_fleet: RegisteredFleet, viewer: object, outsider: object
) -> None:
    host = registered_fleet.host("gpu-01")

    with pytest.raises(services.HostRefused) as not_deployed:
        services.host_journal(host=host, unit="ssh.service", lines=5, user=viewer)
    with pytest.raises(services.HostRefused) as no_role:
        services.host_journal(host=host, unit=UNIT, lines=5, user=outsider)
    with pytest.raises(services.HostRefused) as too_many:
        services.host_journal(host=host, unit=UNIT, lines=10**6, user=viewer)

    assert (not_deployed.value.code, no_role.value.code, too_many.value.code) == (
        "not_found",
        "forbidden",
        "invalid",
    )
    assert not AuditEvent.objects.filter(action=AuditAction.HOST_JOURNAL_READ).exists()


def test_an_unreachable_host_is_a_refusal_and_still_audited(
    registered_fleet: RegisteredFleet, viewer: object
) -> None:
    registered_fleet.set_fault("gpu-02", "unreachable")

    with pytest.raises(services.JournalUnavailable):
        services.host_journal(host=registered_fleet.host("gpu-02"), unit=UNIT, user=viewer)

    event = AuditEvent.objects.get(action=AuditAction.HOST_JOURNAL_READ)
    assert event.data["unit"] == UNIT and event.data["error"]
