"""The health verdict: each piece of evidence moves it, and it never says healthy about a host
that is not."""

from __future__ import annotations

import copy
import datetime as dt

import pytest
import time_machine
from django.utils import timezone

from controlplane.audit.models import AuditEvent
from controlplane.notifications.events import notifications_for
from deployments import health, services
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest
from deployments.unit_files.serving_plan import plan_from_argv
from hosts.models import Host, HostHealth
from hosts.probe import ProbeOutcome
from hosts.services import snapshot_record
from hosts.state import HostState, IntegrityReport
from tests import factories as f

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
UNIT = f.UNIT
PLAN = plan_from_argv(
    ["/opt/vllm/.venv/bin/vllm", "serve", "/models/moonshotai/Kimi-K2.5-NVFP4",
     "--served-model-name", "kimi-k2.5", "--tensor-parallel-size", "8"]
)  # fmt: skip


def evidence(parsed=None, *, status="ok", age=10, key="pinned", units=None, last_good=None):
    parsed = f.parsed_state() if parsed is None else parsed
    snapshot = health.SnapshotFacts(
        pk=7, status=status, taken_at=NOW - dt.timedelta(seconds=age), error="",
        state=HostState.from_json(parsed),
    )  # fmt: skip
    return health.HostEvidence(
        name="gpu-01", key_status=key, probe_interval_seconds=60, now=NOW, snapshot=snapshot,
        last_good=last_good, units=tuple(units if units is not None else [unit()]),
    )  # fmt: skip


def unit(**kwargs):
    defaults = {"unit": UNIT, "model_label": "kimi-k2.5 · Kimi (NVFP4)", "plan": PLAN,
                "expected_unit_sha256": "a" * 64}  # fmt: skip
    return health.UnitEvidence(**{**defaults, **kwargs})


def with_server(**fields):
    parsed = f.parsed_state()
    parsed["deployments"][UNIT]["server"].update(fields)
    return parsed


def verdict_of(ev) -> tuple[str, set[str]]:
    result = health.evaluate(ev)
    return result.verdict, {r.code for r in result.reasons}


def test_a_host_serving_its_revision_is_healthy() -> None:
    assert verdict_of(evidence()) == ("healthy", set())


@pytest.mark.parametrize(
    ("make", "expected", "code"),
    [
        (lambda: evidence(key="changed"), "failed", "host_key_changed"),
        (lambda: evidence(key="unknown"), "unknown", "host_key_unknown"),
        (lambda: evidence(status="unreachable"), "unknown", "unreachable"),
        (lambda: evidence(age=600), "unknown", "stale"),
        (lambda: evidence(f.parsed_state(active="failed")), "failed", "service_failed"),
        (lambda: evidence(f.parsed_state(active="inactive")), "failed", "service_inactive"),
        (lambda: evidence(with_server(healthy=False, health_http_status=503)), "failed",
         "engine_dead"),
        (lambda: evidence(with_server(healthy=False, health_http_status=500)), "degraded",
         "not_healthy"),
        (lambda: evidence(f.parsed_state(gpus=4)), "failed", "gpus_missing"),
        (lambda: evidence(units=[unit(expected_unit_sha256="b" * 64)]), "degraded",
         "unit_file_drift"),
        (lambda: evidence(with_server(model_roots=["/models/Qwen/Qwen3-235B-A22B-FP8"])),
         "failed", "model_drift"),
        (lambda: evidence(units=[unit(integrity=IntegrityReport(
            dist="vllm", version="0.11.2", checked=1873,
            modified=["vllm/model_executor/layers/fused_moe/fused_moe.py"]))]),
         "degraded", "engine_patched"),
        (lambda: evidence(units=[unit(last_change=health.ChangeOutcome(
            3, "model swap", "rolled_back", "incoherent", "otto", NOW))]),
         "degraded", "change_rolled_back"),
        (lambda: evidence(units=[unit(last_change=health.ChangeOutcome(
            3, "model swap", "failed", "restoring failed too", "otto", NOW))]),
         "failed", "change_failed"),
        (lambda: evidence(units=[unit(evaluation=health.Evaluation(
            coherent=False, failures=("five-token prompt",)))]), "failed", "incoherent"),
        (lambda: evidence(units=[unit(evaluation=health.Evaluation(throughput_ratio=0.7))]),
         "degraded", "slow"),
    ],
)  # fmt: skip
def test_each_piece_of_evidence_moves_the_verdict(make, expected, code) -> None:
    verdict, codes = verdict_of(make())
    assert verdict == expected
    assert code in codes


def test_a_driver_failure_fails_the_host_and_other_unreadable_sections_degrade_it() -> None:
    parsed = f.parsed_state()
    parsed["gpus"] = []
    parsed["problems"] = [
        {"section": section, "message": "NVIDIA-SMI has failed"}
        for section in ("gpus", "compute_apps", "gpu_details")
    ]
    result = health.evaluate(evidence(parsed, status="partial"))
    # One failure, one reason: not the same sentence once per nvidia-smi read.
    assert [(r.level, r.code) for r in result.reasons] == [("failed", "gpu_driver")]
    parsed = f.parsed_state()
    parsed["problems"] = [{"section": "metrics:x", "message": "unreadable"}]
    assert verdict_of(evidence(parsed, status="partial")) == ("degraded", {"unreadable"})


def test_a_foreign_gpu_process_degrades_the_host() -> None:
    parsed = f.parsed_state()
    parsed["compute_apps"] = [
        {"pid": 9, "process_name": "python3", "used_memory_mib": 4096,
         "gpu_uuid": "GPU-00000000", "unit": "session-7.scope"}
    ]  # fmt: skip
    verdict, codes = verdict_of(evidence(parsed))
    assert (verdict, codes) == ("degraded", {"foreign_gpu_processes"})


def test_unreachable_names_the_last_known_good_state() -> None:
    good = health.SnapshotFacts(6, "ok", NOW - dt.timedelta(minutes=5), "", HostState())
    result = health.evaluate(evidence(status="unreachable", age=30, last_good=good))
    assert result.verdict == "unknown"
    assert "last known good: snapshot #6, 5 min ago" in result.reasons[0].text


def test_the_worst_reason_decides_and_comes_first() -> None:
    result = health.evaluate(
        evidence(f.parsed_state(gpus=4), units=[unit(expected_unit_sha256="b" * 64)])
    )
    assert result.verdict == "failed"
    assert [r.level for r in result.reasons] == ["failed", "degraded"]


# --- a change of the control plane's own, running ---------------------------------------------

TARGET_SHA, PREVIOUS_SHA = "c" * 64, "a" * 64
INT4 = "/models/moonshotai/Kimi-K2.5-INT4"
NVFP4 = "/models/moonshotai/Kimi-K2.5-NVFP4"


def swap():
    return health.RunningChange(
        pk=12, kind="model swap", by="otto", started_at=NOW - dt.timedelta(seconds=42),
        unit_sha256s=frozenset({TARGET_SHA, PREVIOUS_SHA}), models=frozenset({INT4, NVFP4}),
    )  # fmt: skip


def mid_swap(active="active", sha=TARGET_SHA, roots=(INT4,), **server):
    parsed = f.parsed_state(active=active)
    parsed["deployments"][UNIT]["unit_file_sha256"] = sha
    parsed["deployments"][UNIT]["server"].update(model_roots=list(roots), **server)
    return parsed


@pytest.mark.parametrize(
    ("parsed", "explained"),
    [
        # the new unit file written, the old server still up
        (mid_swap(roots=(NVFP4,)), set()),
        (mid_swap("inactive", healthy=False, health_http_status=None), {"service_changing"}),
        (mid_swap("deactivating", healthy=False, health_http_status=None), {"service_changing"}),
        (mid_swap("activating", healthy=False, health_http_status=None), {"loading"}),
        (mid_swap(healthy=False, health_http_status=503), {"loading"}),
        # the new model serves before the job makes its revision the deployment's current one
        (mid_swap(), set()),
        # a failed verification put the previous revision back
        (mid_swap(sha=PREVIOUS_SHA, roots=(NVFP4,)), set()),
    ],
)  # fmt: skip
def test_what_a_running_change_does_is_changing_not_failed(parsed, explained) -> None:
    result = health.evaluate(evidence(parsed, units=[unit(running=swap())]))
    assert result.verdict == "changing", result.reasons
    assert {r.code for r in result.reasons} == {"change_running", *explained}
    assert {r.level for r in result.reasons} == {"changing"}
    said = next(r.text for r in result.reasons if r.code == "change_running")
    assert "change #12 (model swap) is running" in said and "since 11:59:18 UTC (42 s)" in said
    # The same host without the change: an outage, or drift from the deployed revision.
    assert health.evaluate(evidence(parsed)).verdict != "changing"


@pytest.mark.parametrize(
    ("make", "expected", "code"),
    [
        (lambda p: p["deployments"][UNIT].update(unit_file_sha256="e" * 64), "degraded",
         "unit_file_drift"),
        (lambda p: p["deployments"][UNIT]["server"].update(
            model_roots=["/models/Qwen/Qwen3-235B-A22B-FP8"]), "failed", "model_drift"),
        (lambda p: p["deployments"][UNIT]["unit"].update(active_state="failed"), "failed",
         "service_failed"),
        (lambda p: p.update(gpus=p["gpus"][:4]), "failed", "gpus_missing"),
        (lambda p: p.update(gpus=[], problems=[
            {"section": "gpus", "message": "NVIDIA-SMI has failed"}]), "failed", "gpu_driver"),
    ],
)  # fmt: skip
def test_a_fault_the_running_change_does_not_explain_still_counts(make, expected, code) -> None:
    parsed = mid_swap()
    make(parsed)
    status = "partial" if parsed["problems"] else "ok"
    result = health.evaluate(evidence(parsed, status=status, units=[unit(running=swap())]))
    assert result.verdict == expected
    assert result.reasons[0].code == code
    assert "change_running" in {r.code for r in result.reasons}


def test_an_unreachable_host_is_unknown_even_while_a_change_runs() -> None:
    result = health.evaluate(evidence(status="unreachable", units=[unit(running=swap())]))
    assert result.verdict == "unknown"


# --- stored, kept current, and notified once per transition -----------------------------------


@pytest.fixture
def deployed(db, deployment):
    services.change_target_for(deployment=deployment, kind="restart")  # adopt revision 1
    deployment.refresh_from_db()
    return deployment


def record(host: Host, parsed) -> None:
    outcome = ProbeOutcome(status="ok", duration_ms=50, parsed=copy.deepcopy(parsed))
    snapshot_record(host=host, outcome=outcome, trigger="schedule", integrity=False)


def test_a_probe_keeps_the_verdict_current_and_records_each_transition(deployed) -> None:
    host = deployed.host
    expected = deployed.current_revision.unit_sha256
    healthy = f.parsed_state()
    healthy["deployments"][UNIT]["unit_file_sha256"] = expected
    record(host, healthy)
    assert HostHealth.objects.get(host=host).verdict == "healthy"
    record(host, f.parsed_state(active="failed") | {"deployments": {
        UNIT: {**healthy["deployments"][UNIT], "unit": {
            **healthy["deployments"][UNIT]["unit"], "active_state": "failed"}}}})  # fmt: skip
    row = HostHealth.objects.get(host=host)
    assert row.verdict == "failed" and row.reasons[0]["code"] == "service_failed"
    record(host, healthy)
    assert HostHealth.objects.get(host=host).verdict == "healthy"
    events = AuditEvent.objects.filter(action="host.verdict_changed").order_by("seq")
    assert [(e.data["before"], e.data["after"]) for e in events] == [
        ("healthy", "failed"),
        ("failed", "healthy"),
    ]
    kinds = [n.event_type for e in events for n in notifications_for(e)]
    assert kinds == ["host.degraded", "host.recovered"]


def test_the_outcome_of_the_last_change_counts(deployed, operator) -> None:
    host = deployed.host
    change = ChangeRequest.objects.create(
        host=host, deployment=deployed, kind="model_swap", snapshot=f.make_snapshot(host),
        reason="r", requested_by_name="otto", needs_approval=True, params_digest="-",
        correlation_id="c", status=ChangeStatus.ROLLED_BACK, finished_at=timezone.now(),
        status_reason="incoherent: the smoke completion does not contain 'Paris'",
    )  # fmt: skip
    row = services.host_health_update(host=host)
    assert row.verdict != "healthy"
    assert any(r["code"] == "change_rolled_back" for r in row.reasons)
    assert row.last_change == f"#{change.pk} model swap: rolled back"


def test_patched_engine_files_found_by_an_earlier_check_keep_the_host_degraded(deployed) -> None:
    """The engine check runs hourly; the probes in between still judge by its newest result."""
    host = deployed.host
    healthy = f.parsed_state()
    healthy["deployments"][UNIT]["unit_file_sha256"] = deployed.current_revision.unit_sha256
    checked = copy.deepcopy(healthy)
    checked["deployments"][UNIT]["integrity"] = {
        "dist": "vllm", "version": "0.11.0", "checked": 812,
        "modified": ["vllm/entrypoints/openai/api_server.py"], "missing": [], "added": [],
    }  # fmt: skip
    outcome = ProbeOutcome(status="ok", duration_ms=50, parsed=checked)
    snapshot_record(host=host, outcome=outcome, trigger="schedule", integrity=True)
    record(host, healthy)  # a probe without the check
    row = HostHealth.objects.get(host=host)
    assert row.verdict == "degraded"
    assert "engine_patched" in [r["code"] for r in row.reasons]
    checked["deployments"][UNIT]["integrity"]["modified"] = []
    outcome = ProbeOutcome(status="ok", duration_ms=50, parsed=checked)
    snapshot_record(host=host, outcome=outcome, trigger="schedule", integrity=True)
    record(host, healthy)
    assert HostHealth.objects.get(host=host).verdict == "healthy"


def test_since_is_when_the_verdict_last_changed_not_when_it_was_last_computed(deployed) -> None:
    host = deployed.host
    healthy = f.parsed_state()
    healthy["deployments"][UNIT]["unit_file_sha256"] = deployed.current_revision.unit_sha256
    failed = copy.deepcopy(healthy)
    failed["deployments"][UNIT]["unit"]["active_state"] = "failed"
    start = timezone.now()
    for seconds, parsed in ((0, healthy), (60, healthy), (120, failed), (180, failed)):
        with time_machine.travel(start + dt.timedelta(seconds=seconds), tick=False):
            record(host, parsed)
    row = HostHealth.objects.get(host=host)
    assert (row.verdict, row.since) == ("failed", start + dt.timedelta(seconds=120))
    assert row.computed_at == start + dt.timedelta(seconds=180)


def test_a_running_change_is_changing_on_every_page_and_notifies_nothing(deployed) -> None:
    """Stored: the verdict while the change runs is `changing`, and neither going into it nor
    coming out of it once the change ended (a probe round first, before the job's own update)
    is a host.degraded or host.recovered of its own: the job's outcome says it."""
    from deployments import lifecycle

    host = deployed.host
    healthy = f.parsed_state()
    healthy["deployments"][UNIT]["unit_file_sha256"] = deployed.current_revision.unit_sha256
    record(host, healthy)
    change = ChangeRequest.objects.create(
        host=host, deployment=deployed, kind="restart", snapshot=f.make_snapshot(host),
        from_revision=deployed.current_revision, reason="r", requested_by_name="otto",
        needs_approval=False, params_digest="-", correlation_id="c", status=ChangeStatus.RUNNING,
        started_at=timezone.now(),
    )  # fmt: skip
    restarting = copy.deepcopy(healthy)
    restarting["deployments"][UNIT]["unit"]["active_state"] = "inactive"
    record(host, restarting)
    row = HostHealth.objects.get(host=host)
    assert (row.verdict, row.severity) == ("changing", 1)
    assert [r["code"] for r in row.reasons] == ["change_running", "service_changing"]
    assert f"change #{change.pk} (restart) is running" in row.reasons[0]["text"]
    lifecycle.change_transition(change=change, source="running", target="succeeded")
    record(host, healthy)
    assert HostHealth.objects.get(host=host).verdict == "healthy"
    events = AuditEvent.objects.filter(action="host.verdict_changed").order_by("seq")
    assert [(e.data["before"], e.data["after"], e.data["during_change"]) for e in events] == [
        ("healthy", "changing", change.pk),
        ("changing", "healthy", change.pk),
    ]
    assert [n for e in events for n in notifications_for(e)] == []


def test_a_change_that_ends_while_a_round_decides_is_not_overwritten_by_changing(
    deployed, monkeypatch
) -> None:
    """A probe round gathers its evidence while the job runs; the job ends and stores its own
    verdict before the round stores its: the round decides again with the job ended, instead of
    storing a `changing` that would stand until the next probe."""
    from deployments import lifecycle
    from deployments.services import verdicts as store

    host = deployed.host
    healthy = f.parsed_state()
    healthy["deployments"][UNIT]["unit_file_sha256"] = deployed.current_revision.unit_sha256
    change = ChangeRequest.objects.create(
        host=host, deployment=deployed, kind="restart", snapshot=f.make_snapshot(host),
        from_revision=deployed.current_revision, reason="r", requested_by_name="otto",
        needs_approval=False, params_digest="-", correlation_id="c", status=ChangeStatus.RUNNING,
        started_at=timezone.now(),
    )  # fmt: skip
    record(host, healthy)
    assert HostHealth.objects.get(host=host).verdict == "changing"
    gather = store._evidence
    calls = []

    def job_ends_meanwhile(hosts, *args):
        found = gather(hosts, *args)
        if not calls:  # the round's first look: the job finishes right after it
            lifecycle.change_transition(change=change, source="running", target="succeeded")
            calls.append("ended")
            monkeypatch.setattr(store, "_evidence", gather)
            store.host_health_update(host=host, ended_change=change.pk)
            monkeypatch.setattr(store, "_evidence", job_ends_meanwhile)
        return found

    monkeypatch.setattr(store, "_evidence", job_ends_meanwhile)
    store.host_health_update(host=host)
    row = HostHealth.objects.get(host=host)
    assert calls == ["ended"]
    assert row.verdict == "healthy", row.reasons
    events = AuditEvent.objects.filter(action="host.verdict_changed").order_by("seq")
    assert [(e.data["before"], e.data["after"]) for e in events][-1] == ("changing", "healthy")


STARTED = dt.datetime(2026, 11, 30, 9, 12, 41, tzinfo=dt.UTC)  # f.parsed_state's unit
REFUSED = (
    "curl: (7) Failed to connect to 127.0.0.1 port 8000 after 0 ms: Couldn't connect to server"
)


def refused_after(seconds: int | None, **server):
    """Active since STARTED, probed `seconds` later on the host's clock; /health refused."""
    fields = {"healthy": False, "health_http_status": None, "health_error": REFUSED, **server}
    parsed = with_server(**fields)
    parsed["host_time"] = None if seconds is None else int(STARTED.timestamp()) + seconds
    return parsed


@pytest.mark.parametrize(
    ("seconds", "limit", "expected", "code", "words"),
    [
        (40, 900, "degraded", "loading", "started 40 s ago and is loading the model: port 8000"),
        (899, 900, "degraded", "loading", "for up to 900 s"),
        (901, 900, "failed", "port_refused", "active for 15 min, and port 8000 still refuses"),
        (7200, 3600, "failed", "port_refused", "a model loads within 3600 s here"),
        (None, 900, "degraded", "not_healthy", "port 8000 refuses connections"),
    ],
)
def test_a_port_that_refuses_is_loading_until_the_model_should_have_loaded(
    seconds, limit, expected, code, words
) -> None:
    """vLLM 0.32 has no listening socket while it loads: an active unit whose port refuses is
    loading for as long as its deployment gives a model, then failed."""
    result = health.evaluate(
        evidence(refused_after(seconds), units=[unit(load_timeout_seconds=limit)])
    )
    assert result.verdict == expected
    (reason,) = result.reasons
    assert reason.code == code and words in reason.text, reason.text


def test_a_timeout_is_not_read_as_a_refused_port() -> None:
    parsed = refused_after(10, health_error="curl: (28) Operation timed out after 5001 ms")
    result = health.evaluate(evidence(parsed))
    assert (result.verdict, [r.code for r in result.reasons]) == ("degraded", ["not_healthy"])
    assert "/health does not answer" in result.reasons[0].text


def test_a_dead_engine_is_failed_at_once_even_right_after_a_start() -> None:
    parsed = refused_after(5, health_http_status=503, health_error=None)
    result = health.evaluate(evidence(parsed))
    assert result.verdict == "failed"
    assert "engine behind its API server is not running" in result.reasons[0].text
