"""/metrics after real probes of the simulated fleet: the values are the snapshot's, and the
snapshot's are the host's."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.audit.models import AuditVerification
from deployments import services as change_services
from deployments.choices import ChangeKind
from hosts import services as host_services
from hosts.choices import SnapshotStatus
from hosts.models import Host
from tests import factories as f

pytestmark = pytest.mark.django_db
UNIT = "vllm-kimi-k25.service"
MIB = 1048576


def probe_all() -> list:
    hosts = list(Host.objects.select_related("credential").order_by("name"))
    return host_services.hosts_probe(hosts=hosts, trigger="schedule")


def test_gpu_series_equal_the_snapshot_and_the_host(registered_fleet, scrape):
    registered_fleet.set_inflight("gpu-01", 3, 2)
    snapshot = probe_all()[0]
    truth = registered_fleet.state("gpu-01")
    assert snapshot.host.name == "gpu-01" and snapshot.status == SnapshotStatus.OK
    with time_machine.travel(snapshot.taken_at + dt.timedelta(seconds=42), tick=False):
        metrics = scrape()

    assert len(metrics.series("controlplane_gpu_memory_used_bytes", host="gpu-01")) == 8
    seen, real = snapshot.parsed["gpus"][3], truth["gpus"][3]
    gpu = {"host": "gpu-01", "gpu": "3", "uuid": real["uuid"]}
    assert seen["uuid"] == real["uuid"]
    used = metrics.value("controlplane_gpu_memory_used_bytes", **gpu)
    assert used == seen["memory_used_mib"] * MIB == real["memory_used_mib"] * MIB
    total = metrics.value("controlplane_gpu_memory_total_bytes", **gpu)
    assert total == seen["memory_total_mib"] * MIB == real["memory_total_mib"] * MIB
    limit = metrics.value("controlplane_gpu_power_limit_watts", **gpu)
    assert limit == seen["power_limit_w"] == real["power_limit_w"]
    # Power, utilisation and temperature move with the host's clock: the metric is exactly
    # what the snapshot holds, and the snapshot is what the host had moments earlier.
    draw = metrics.value("controlplane_gpu_power_draw_watts", **gpu)
    assert draw == seen["power_draw_w"] == pytest.approx(real["power_draw_w"], abs=3)
    ratio = metrics.value("controlplane_gpu_utilization_ratio", **gpu)
    assert ratio == pytest.approx(seen["utilization_pct"] / 100)
    temperature = metrics.value("controlplane_gpu_temperature_celsius", **gpu)
    assert temperature == seen["temperature_c"] == pytest.approx(real["temperature_c"], abs=3)


def test_host_series_equal_the_newest_snapshot(registered_fleet, scrape):
    registered_fleet.set_inflight("gpu-01", 3, 2)
    snapshot = probe_all()[0]
    truth = registered_fleet.state("gpu-01")
    with time_machine.travel(snapshot.taken_at + dt.timedelta(seconds=42), tick=False):
        metrics = scrape()

    host = {"host": "gpu-01"}
    assert metrics.value("controlplane_snapshot_age_seconds", **host) == 42.0
    assert metrics.value("controlplane_snapshot_timestamp_seconds", **host) == pytest.approx(
        snapshot.taken_at.timestamp()
    )
    duration = metrics.value("controlplane_probe_duration_seconds", **host)
    assert duration == snapshot.duration_ms / 1000
    assert metrics.value("controlplane_snapshot_status", host="gpu-01", status="ok") == 1
    others = metrics.series("controlplane_snapshot_status", host="gpu-01")
    assert sum(v for _, v in others) == 1 and len(others) == len(SnapshotStatus.values)
    assert metrics.value("controlplane_host_up", **host) == 1
    assert metrics.value("controlplane_host_enabled", **host) == 1
    assert metrics.value("controlplane_host_key_status", host="gpu-01", status="pinned") == 1
    unit = {"host": "gpu-01", "unit": UNIT}
    assert metrics.value("controlplane_requests_running", **unit) == 3
    assert metrics.value("controlplane_requests_waiting", **unit) == 2
    assert metrics.value("controlplane_service_active", **unit) == 1
    assert metrics.value("controlplane_server_healthy", **unit) == 1
    root = truth["units"][UNIT]["model_path"]
    served = metrics.series("controlplane_model_served_info", **unit)
    assert served == [({**unit, "model": "kimi-k2.5", "root": root}, 1.0)]
    assert truth["models"] == ["kimi-k2.5"]
    assert metrics.value("controlplane_probe_outcomes", host="gpu-01", status="ok") == 1


def test_an_unreachable_host_is_down_and_has_no_gpu_series(registered_fleet, scrape):
    probe_all()
    registered_fleet.set_fault("gpu-02", "unreachable")
    probe_all()
    metrics = scrape()
    assert metrics.value("controlplane_host_up", host="gpu-02") == 0
    assert metrics.value("controlplane_snapshot_status", host="gpu-02", status="unreachable") == 1
    assert metrics.series("controlplane_gpu_memory_used_bytes", host="gpu-02") == []
    assert metrics.series("controlplane_requests_running", host="gpu-02") == []
    assert metrics.value("controlplane_probe_outcomes", host="gpu-02", status="unreachable") == 1
    assert metrics.value("controlplane_probe_outcomes", host="gpu-02", status="ok") == 1
    assert metrics.value("controlplane_probe_outcomes", host="gpu-01", status="ok") == 2
    assert metrics.value("controlplane_host_up", host="gpu-01") == 1


def test_probe_outcomes_count_only_the_window(settings, scrape):
    settings.METRICS_PROBE_WINDOW_SECONDS = 600
    host = f.make_host("gpu-01")
    f.make_snapshot(host, status="error", age=900)
    f.make_snapshot(host, status="ok", age=300)
    f.make_snapshot(host, status="ok", age=5)
    metrics = scrape()
    assert metrics.value("controlplane_probe_outcomes_window_seconds") == 600
    assert metrics.value("controlplane_probe_outcomes", host="gpu-01", status="ok") == 2
    assert metrics.value("controlplane_probe_outcomes", host="gpu-01", status="error") == 0


def test_a_host_never_probed_does_not_break_the_scrape(scrape):
    f.make_snapshot(f.make_host("gpu-01"))
    f.make_host("gpu-09", port=2209)
    metrics = scrape()
    assert metrics.value("controlplane_host_up", host="gpu-09") == 0
    assert metrics.value("controlplane_host_enabled", host="gpu-09") == 1
    assert metrics.series("controlplane_snapshot_age_seconds", host="gpu-09") == []
    assert metrics.series("controlplane_snapshot_status", host="gpu-09") == []
    assert metrics.value("controlplane_probe_outcomes", host="gpu-09", status="ok") == 0
    assert len(metrics.series("controlplane_gpu_memory_used_bytes", host="gpu-01")) == 8


def test_a_snapshot_with_missing_readings_leaves_those_series_out(scrape):
    parsed = f.parsed_state(gpus=2)
    parsed["gpus"][1]["power_draw_w"] = None  # nvidia-smi printed [N/A]
    parsed["deployments"][UNIT]["server"]["requests_running"] = None
    f.make_snapshot(f.make_host("gpu-01"), status="partial", parsed=parsed)
    metrics = scrape()
    assert len(metrics.series("controlplane_gpu_power_draw_watts", host="gpu-01")) == 1
    assert len(metrics.series("controlplane_gpu_power_limit_watts", host="gpu-01")) == 2
    assert metrics.series("controlplane_requests_running", host="gpu-01") == []
    assert metrics.value("controlplane_host_up", host="gpu-01") == 1


def test_change_requests_by_kind_and_status_and_approvals_waiting(operator, scrape):
    catalog = f.make_catalog()
    swap_on = f.make_deployment(f.make_host("gpu-01"), catalog["NVFP4"])
    restart_on = f.make_deployment(f.make_host("gpu-02", port=2202), catalog["NVFP4"])
    swap = change_services.change_request_create(
        user=operator,
        deployment=swap_on,
        kind="model_swap",
        snapshot=f.make_snapshot(swap_on.host),
        reason="INT4 is faster",
        model=catalog["INT4"],
    )
    change_services.change_request_create(
        user=operator,
        deployment=restart_on,
        kind="restart",
        snapshot=f.make_snapshot(restart_on.host),
        reason="patch",
    )
    with time_machine.travel(swap.created_at + dt.timedelta(seconds=90), tick=False):
        metrics = scrape()
    pending = {"kind": "model_swap", "status": "pending_approval"}
    assert metrics.value("controlplane_change_requests", **pending) == 1
    assert metrics.value("controlplane_change_requests", kind="restart", status="queued") == 1
    # Every kind and status is there from the start, so the first failure is an increase.
    assert metrics.value("controlplane_change_requests", kind="restart", status="failed") == 0
    assert len(metrics.series("controlplane_change_requests")) == len(ChangeKind) * 10
    assert metrics.value("controlplane_approvals_waiting") == 1
    assert metrics.value("controlplane_approval_oldest_waiting_seconds") == 90


def test_the_last_audit_verification_is_reported(scrape):
    assert scrape().series("controlplane_audit_verification_ok") == []
    started = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)
    common = {"trigger": "beat", "head_hash": "a" * 64, "checkpoints": 1, "duration_ms": 1500}
    AuditVerification.objects.create(
        started_at=started - dt.timedelta(hours=1), ok=True, events=10, head_seq=10, **common
    )
    AuditVerification.objects.create(
        started_at=started, ok=False, events=12, head_seq=12, broken_seq=7, **common
    )
    metrics = scrape()
    assert metrics.value("controlplane_audit_verification_ok") == 0
    assert metrics.value("controlplane_audit_verification_events") == 12
    assert metrics.value("controlplane_audit_verification_timestamp_seconds") == started.timestamp()
    assert metrics.value("controlplane_audit_verification_duration_seconds") == 1.5


def test_a_scrape_costs_the_same_few_queries_for_2_hosts_or_20(client, metrics_token):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {metrics_token}")
        assert response.status_code == 200
        return len(captured.captured_queries)

    for n in range(2):
        f.make_snapshot(f.make_host(f"gpu-{n:02d}", port=2201 + n))
    few = queries()
    for n in range(2, 20):
        f.make_snapshot(f.make_host(f"gpu-{n:02d}", port=2201 + n))
    # Five for hosts, snapshots, probe outcomes, change counts and the audit verification; one
    # for the evaluations of the revisions shown, one for recent changes, and two for rollouts
    # (recent ones, counts by status; a third reads their events when there are any), whose
    # own tests grow those rows: tests/monitoring/test_evaluations.py, test_change_events.py,
    # test_rollout_events.py.
    assert queries() == few <= 9


def test_every_family_is_a_documented_gauge(scrape):
    f.make_snapshot(f.make_host("gpu-01"))
    metrics = scrape()
    assert set(metrics.types.values()) == {"gauge"}
    assert all(name.startswith("controlplane_") for name in metrics.types)


def test_gpu_faults_are_series_beside_their_gpu(scrape):
    parsed = f.parsed_state(gpus=2)
    parsed["gpu_details"] = [
        {"index": 0, "persistence_mode": True, "ecc_uncorrected_volatile": 0,
         "pcie_width_current": 16, "pcie_width_max": 16, "clock_event_reasons": 0},
        {"index": 1, "persistence_mode": False, "ecc_uncorrected_volatile": 2,
         "pcie_width_current": 8, "pcie_width_max": 16, "clock_event_reasons": 0x48},
    ]  # fmt: skip
    parsed["gpu_errors"] = [{"index": 1, "ecc_uncorrected_aggregate": 5, "remap_pending": True,
                             "remap_failure": False}]  # fmt: skip
    links = [{"link": n, "active": n != 4, "replay_errors": 3, "crc_errors": 1} for n in range(18)]
    parsed["nvlinks"] = [{"index": 1, "links": links}]
    parsed["xid_events"] = [
        {"code": 79, "pci": "0000:5d:00", "gpu_index": 1, "message": "GPU has fallen off"},
        {"code": 79, "pci": "0000:5d:00", "gpu_index": 1, "message": "GPU has fallen off"},
        {"code": 13, "pci": "0000:9a:00", "gpu_index": None, "message": "pid=7"},
    ]
    parsed["lost_gpus"] = [{"message": "GPU is lost", "pci_bus_id": "00000000:5D:00.0"}]
    f.make_snapshot(f.make_host("gpu-01"), status="partial", parsed=parsed)

    m = scrape()

    gpu1 = {"host": "gpu-01", "gpu": "1"}
    assert m.value("controlplane_gpu_ecc_uncorrected_volatile_errors", **gpu1) == 2
    assert m.value("controlplane_gpu_ecc_uncorrected_aggregate_errors", **gpu1) == 5
    assert m.value("controlplane_gpu_remapped_rows_pending", **gpu1) == 1
    assert m.value("controlplane_gpu_remapped_rows_failure", **gpu1) == 0
    assert m.value("controlplane_gpu_pcie_link_width", **gpu1) == 8
    assert m.value("controlplane_gpu_pcie_link_width_max", **gpu1) == 16
    assert m.value("controlplane_gpu_clock_event_reasons", **gpu1) == 0x48
    assert m.value("controlplane_gpu_persistence_mode", **gpu1) == 0
    assert m.value("controlplane_gpu_persistence_mode", host="gpu-01", gpu="0") == 1
    assert m.value("controlplane_gpu_nvlink_links_inactive", **gpu1) == 1
    assert m.value("controlplane_gpu_nvlink_errors", **gpu1, counter="replay") == 54
    assert m.value("controlplane_gpu_nvlink_errors", **gpu1, counter="crc") == 18
    assert m.series("controlplane_gpu_nvlink_errors", counter="recovery") == []  # not read
    assert m.value("controlplane_gpu_xid_events", **gpu1, xid="79") == 2
    assert m.value("controlplane_gpu_xid_events", host="gpu-01", gpu="0000:9a:00", xid="13") == 1
    assert m.value("controlplane_gpu_lost", host="gpu-01", gpu="00000000:5D:00.0") == 1
