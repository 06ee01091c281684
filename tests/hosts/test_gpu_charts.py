"""GPU history: samples written with each probe, bucketed by the database, served as JSON."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from hosts import services
from hosts.charts import WINDOWS, gpu_chart_series
from hosts.choices import SnapshotStatus
from hosts.models import GpuSample, Host
from hosts.probe import ProbeOutcome
from tests import factories as f
from tests.gpu_history import every, make_gpu_history

pytestmark = pytest.mark.django_db
UTC = dt.UTC
# 12:07:30: the 24 h window's last bucket starts at 12:00, the 7 d window's too
NOW = dt.datetime(2026, 12, 1, 12, 7, 30, tzinfo=UTC)


def at(hour: int, minute: int, *, days_before: int = 0) -> dt.datetime:
    """A time on NOW's day, or `days_before` it."""
    return dt.datetime(2026, 12, 1, hour, minute, tzinfo=UTC) - dt.timedelta(days=days_before)


def epoch(moment: dt.datetime) -> int:
    return int(moment.timestamp())


@pytest.fixture
def host() -> Host:
    return f.make_host("gpu-01")


# --- written by the probe path ------------------------------------------------------------------


def test_each_probe_writes_one_sample_per_gpu_with_its_snapshot(registered_fleet):
    host = Host.objects.select_related("credential").get(pk=registered_fleet.host("gpu-01").pk)
    first = services.host_probe(host=host, trigger="manual")
    second = services.host_probe(host=host, trigger="manual")
    # partial (a section unreadable) still has GPU readings; both kinds are sampled
    assert {first.status, second.status} <= {SnapshotStatus.OK, SnapshotStatus.PARTIAL}

    samples = GpuSample.objects.filter(host=host).order_by("snapshot_id", "gpu")
    assert samples.count() == 16
    assert not GpuSample.objects.exclude(host=host).exists()
    for snapshot in (first, second):
        rows = [s for s in samples if s.snapshot_id == snapshot.pk]
        assert [s.gpu for s in rows] == list(range(8))
        for row, gpu in zip(rows, snapshot.state().gpus, strict=True):
            assert row.minute == int(snapshot.taken_at.timestamp()) // 60
            assert row.memory_used_mib == gpu.memory_used_mib
            assert row.memory_total_mib == gpu.memory_total_mib
            assert row.power_draw_w == gpu.power_draw_w
            assert row.utilization_pct == gpu.utilization_pct
            assert row.temperature_c == gpu.temperature_c


def test_snapshots_without_readings_write_no_samples(host):
    outcome = ProbeOutcome(status=SnapshotStatus.UNREACHABLE, duration_ms=5, error="timed out")
    services.snapshot_record(host=host, outcome=outcome, trigger="manual", integrity=False)
    assert not GpuSample.objects.exists()


def test_odd_readings_are_dropped_not_fatal_to_the_probe(host):
    parsed = f.parsed_state(gpus=2)
    parsed["gpus"][0]["utilization_pct"] = -1  # would fail the column's range check
    parsed["gpus"].append(dict(parsed["gpus"][1]))  # the same index twice
    snapshot = f.make_snapshot(host, parsed=parsed)
    samples = services.samples.gpu_samples_for([snapshot])
    assert [(s.gpu, s.utilization_pct) for s in samples] == [(0, None), (1, 0)]


# --- backfill ------------------------------------------------------------------------------------


def test_the_backfill_fills_old_snapshots_once(host):
    old = [f.make_snapshot(host, age=age) for age in (300, 200, 100)]  # saved without samples
    f.make_snapshot(host, status="unreachable", parsed={})
    assert not GpuSample.objects.exists()

    out = io.StringIO()
    call_command("backfill_gpu_samples", "--batch", "2", stdout=out)
    assert "24 GPU samples written for 3 snapshots" in out.getvalue()
    assert sorted(set(GpuSample.objects.values_list("snapshot_id", flat=True))) == [
        s.pk for s in old
    ]

    out = io.StringIO()
    call_command("backfill_gpu_samples", stdout=out)
    assert "0 GPU samples written for 0 snapshots" in out.getvalue()
    assert GpuSample.objects.count() == 24


# --- bucketing -----------------------------------------------------------------------------------


def _sample_at(host: Host, moment: dt.datetime, gpu: int, **readings: object) -> None:
    snapshot = f.make_snapshot(host, parsed={})
    values = {
        "memory_used_mib": None,
        "memory_total_mib": None,
        "power_draw_w": None,
        "utilization_pct": None,
        "temperature_c": None,
        **readings,
    }
    GpuSample.objects.create(
        host=host, snapshot=snapshot, minute=GpuSample.minute_of(moment),
        gpu=gpu, **values,
    )  # fmt: skip


@pytest.fixture
def known_samples(host: Host) -> Host:
    full = {"memory_total_mib": 80_000, "utilization_pct": 10, "temperature_c": 40}
    _sample_at(host, at(11, 46), 0, memory_used_mib=40_000, power_draw_w=100.0, **full)
    _sample_at(host, at(11, 52), 0, memory_used_mib=60_000, power_draw_w=201.0, **full)
    _sample_at(host, at(11, 59), 1, memory_used_mib=8_000, **full)  # no power reading
    _sample_at(host, at(12, 5), 0, memory_used_mib=20_000, power_draw_w=50.0, **full)
    _sample_at(host, at(12, 14, days_before=1), 0, power_draw_w=999.0)  # before the 24 h window
    _sample_at(host, at(12, 9), 0, power_draw_w=999.0)  # after now: a clock ahead
    return host


def test_a_bucket_holds_the_average_and_the_memory_peak_of_its_samples(known_samples):
    data = gpu_chart_series(known_samples, "24h", now=NOW)
    assert data["bucket_seconds"] == 900
    assert len(data["t"]) == 96
    assert data["t"][-1] == epoch(at(12, 0))
    assert data["t"][0] == epoch(at(12, 15, days_before=1))
    assert data["gpus"] == [0, 1]
    quarter = data["t"].index(epoch(at(11, 45)))
    series = data["series"]
    assert series["power_w"]["0"][quarter] == 150.5
    assert series["memory_pct"]["0"][quarter] == 62.5  # (40,000 + 60,000) / 2 of 80,000
    assert series["memory_max_pct"]["0"][quarter] == 75.0
    assert series["utilization_pct"]["0"][quarter] == 10.0
    assert series["temperature_c"]["0"][quarter] == 40.0
    assert series["power_w"]["1"][quarter] is None  # a GPU that did not say is not zero
    assert series["memory_pct"]["1"][quarter] == 10.0
    assert series["power_w"]["0"][-1] == 50.0  # the current, still filling bucket
    # Every other bucket is empty: the samples outside the window are not in any of them.
    assert sum(v is not None for v in series["power_w"]["0"]) == 2
    assert data["memory_total_mib"] == {"0": 80_000, "1": 80_000}
    assert data["units"]["temperature_c"] == "°C"


def test_the_hour_window_has_a_point_per_minute(known_samples):
    data = gpu_chart_series(known_samples, "1h", now=NOW)
    assert (len(data["t"]), data["bucket_seconds"]) == (60, 60)
    assert data["t"][-1] == epoch(at(12, 7))
    power = dict(zip(data["t"], data["series"]["power_w"]["0"], strict=True))
    assert power[epoch(at(11, 46))] == 100.0
    assert power[epoch(at(11, 52))] == 201.0
    assert power[epoch(at(12, 5))] == 50.0
    assert sum(v is not None for v in power.values()) == 3


def test_the_week_window_has_hourly_buckets(known_samples):
    data = gpu_chart_series(known_samples, "7d", now=NOW)
    assert (len(data["t"]), data["bucket_seconds"]) == (168, 3600)
    power = dict(zip(data["t"], data["series"]["power_w"]["0"], strict=True))
    assert power[epoch(at(11, 0))] == 150.5
    assert power[epoch(at(12, 0))] == 50.0
    assert power[epoch(at(12, 0, days_before=1))] == 999.0  # inside a week, outside a day


def test_an_unknown_window_is_refused(host):
    with pytest.raises(ValueError, match="unknown window"):
        gpu_chart_series(host, "2d")


def test_a_host_without_history_has_empty_series(host):
    data = gpu_chart_series(host, "1h", now=NOW)
    assert data["gpus"] == []
    assert data["series"]["power_w"] == {}
    assert len(data["t"]) == 60


# --- one query, whatever the history -------------------------------------------------------------


@pytest.mark.parametrize("window", list(WINDOWS))
def test_each_window_is_two_queries_whatever_the_row_count(
    host, window, django_assert_max_num_queries
):
    times = every(10, until=NOW, span=dt.timedelta(days=8))
    written = make_gpu_history(host, times=times)
    assert written > 9000
    with django_assert_max_num_queries(2):  # the buckets, and the newest snapshot's events
        data = gpu_chart_series(host, window, now=NOW)
    spec = WINDOWS[window]
    assert len(data["t"]) == spec.buckets <= 170
    assert data["gpus"] == list(range(8))
    filled = sum(v is not None for v in data["series"]["power_w"]["0"])
    # a sample every 10 minutes: in each 15 min and hour bucket, in 6 of the hour's minutes
    assert filled == (spec.buckets if spec.bucket_minutes >= 10 else 6)


# --- the JSON view -------------------------------------------------------------------------------


def test_anonymous_users_are_sent_to_sign_in(client, host):
    response = client.get(reverse("hosts:gpu_series", args=["gpu-01"]))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_users_without_a_role_are_refused(client, host, outsider):
    client.force_login(outsider)
    assert client.get(reverse("hosts:gpu_series", args=["gpu-01"])).status_code == 403


def test_viewers_get_the_series_in_a_bounded_number_of_queries(client, host, viewer):
    client.force_login(viewer)
    url = reverse("hosts:gpu_series", args=["gpu-01"])
    with CaptureQueriesContext(connection) as empty:
        assert client.get(url, {"window": "7d"}).status_code == 200
    make_gpu_history(host, times=every(5, until=timezone.now(), span=dt.timedelta(days=7)))
    with CaptureQueriesContext(connection) as full:
        response = client.get(url, {"window": "7d"})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["window"] == "7d"
    assert set(body["series"]) == {
        "memory_pct", "memory_max_pct", "power_w", "utilization_pct", "temperature_c"
    }  # fmt: skip
    assert len(full.captured_queries) == len(empty.captured_queries)


def test_the_default_window_is_a_day(client, host, viewer):
    client.force_login(viewer)
    response = client.get(reverse("hosts:gpu_series", args=["gpu-01"]))
    assert response.json()["window"] == "24h"


def test_a_bad_window_is_a_400_that_says_why(client, host, viewer):
    client.force_login(viewer)
    response = client.get(reverse("hosts:gpu_series", args=["gpu-01"]), {"window": "1y"})
    assert response.status_code == 400
    assert response.json() == {
        "error": "unknown window '1y': use one of 1h, 24h, 7d (e.g. ?window=24h)"
    }


def test_an_unknown_host_is_a_404(client, viewer):
    client.force_login(viewer)
    assert client.get(reverse("hosts:gpu_series", args=["nope"])).status_code == 404


# --- the host page -------------------------------------------------------------------------------


def test_the_host_page_has_the_chart_section_and_no_inline_script(client, host, viewer):
    client.force_login(viewer)
    body = client.get(reverse("hosts:detail", args=["gpu-01"]), {"window": "7d"}).content.decode()
    assert 'data-gpu-charts="/hosts/gpu-01/gpu-series.json"' in body
    assert 'data-window="7d"' in body
    assert 'href="?window=7d#gpu-charts" data-window="7d" aria-current="true"' in body
    assert body.count("data-chart=") == 4
    assert "vendor/uplot/uPlot.iife.min.js" in body
    assert "The charts need JavaScript" in body  # until gpu-charts.js replaces it
    for tag in body.split("<script")[1:]:
        assert tag.split(">", 1)[0].strip().startswith("src="), "an inline script"


def test_an_unknown_window_on_the_page_falls_back_to_a_day(client, host, viewer):
    client.force_login(viewer)
    body = client.get(reverse("hosts:detail", args=["gpu-01"]), {"window": "x"}).content.decode()
    assert 'data-window="24h"' in body


# --- GPU events on the charts -------------------------------------------------------------


def test_xids_of_the_newest_snapshot_are_events_on_the_charts(host):
    parsed = f.parsed_state()
    parsed["xid_events"] = [
        {"code": 79, "pci": "0000:5d:00", "gpu_index": 3, "message": "pid=0, GPU has fallen "
         "off the bus.", "at": at(11, 40).isoformat()},
        {"code": 13, "pci": "0000:18:00", "gpu_index": None, "message": "pid=7",
         "at": at(9, 0, days_before=3).isoformat()},  # before the window
        {"code": 48, "pci": "0000:18:00", "gpu_index": 0, "message": "", "at": None},
    ]  # fmt: skip
    f.make_snapshot(host, parsed=parsed)

    events = gpu_chart_series(host, "24h", now=NOW)["events"]

    assert events == [
        {"t": epoch(at(11, 40)), "gpu": 3, "label": "Xid 79: GPU has fallen off the bus"}
    ]
    assert gpu_chart_series(host, "7d", now=NOW)["events"][-1]["label"].startswith("Xid 13")


def test_a_host_without_snapshots_has_no_chart_events(host):
    assert gpu_chart_series(host, "1h", now=NOW)["events"] == []
