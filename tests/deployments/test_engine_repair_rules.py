"""Engine repair and the engine integrity check in pre-flight: what a repair rests on, what it
reinstalls, who must approve it, and the acknowledgement a swap on a patched engine needs."""

from __future__ import annotations

import pytest
from django.test import override_settings

from controlplane.audit.models import AuditEvent
from deployments import services
from deployments.choices import ChangeStatus
from tests import factories as f

pytestmark = pytest.mark.django_db
PATCHED = "vllm/model_executor/layers/fused_moe/fused_moe.py"


def request(user, deployment, snapshot, kind="engine_repair", **kwargs):
    return services.change_request_create(
        user=user, deployment=deployment, kind=kind, snapshot=snapshot,
        reason="stale patches in the engine", **kwargs,
    )  # fmt: skip


def test_a_repair_reinstalls_exactly_what_the_integrity_check_found(operator, deployment, host):
    snapshot = f.make_integrity_snapshot(host, modified=(PATCHED,), version="0.11.2")
    change = request(operator, deployment, snapshot)
    assert change.params["engine_package"] == {
        "dist": "vllm",
        "version": "0.11.2",
        "source": "",
        "integrity_snapshot": snapshot.pk,
    }
    assert change.status == ChangeStatus.PENDING_APPROVAL
    assert change.params["approval_because"] == ["every engine repair needs a second person"]


def test_a_repair_from_the_deployments_wheel_directory(operator, deployment, host):
    deployment.engine_package_source = "/opt/wheels"
    deployment.save(update_fields=["engine_package_source"])
    change = request(operator, deployment, f.make_integrity_snapshot(host, modified=(PATCHED,)))
    assert change.params["engine_package"]["source"] == "/opt/wheels"


@override_settings(APPROVAL_REQUIRED_KINDS=[])
def test_a_repair_needs_approval_whatever_the_setting_says(operator, deployment, host):
    change = request(operator, deployment, f.make_integrity_snapshot(host))
    assert change.needs_approval and change.status == ChangeStatus.PENDING_APPROVAL


def test_a_repair_without_an_integrity_check_is_refused(operator, deployment, host):
    with pytest.raises(services.ChangeRefused, match="needs an integrity check"):
        request(operator, deployment, f.make_snapshot(host))


def test_an_integrity_check_older_than_the_decision_does_not_count(operator, deployment, host):
    f.make_integrity_snapshot(host, age=60)
    with pytest.raises(services.ChangeRefused, match="needs an integrity check"):
        request(operator, deployment, f.make_snapshot(host, age=5))


def test_a_newer_integrity_check_backs_an_older_decision(operator, deployment, host):
    decided = f.make_snapshot(host, age=30)
    checked = f.make_integrity_snapshot(host, age=5, modified=(PATCHED,))
    change = request(operator, deployment, decided)
    assert change.params["engine_package"]["integrity_snapshot"] == checked.pk


def test_an_unreadable_engine_cannot_be_repaired_blind(operator, deployment, host):
    snapshot = f.make_integrity_snapshot(host, error="distribution not installed")
    with pytest.raises(services.ChangeRefused, match="could not read the engine"):
        request(operator, deployment, snapshot)


def test_a_swap_on_a_patched_engine_needs_an_acknowledgement(operator, deployment, host, catalog):
    snapshot = f.make_integrity_snapshot(host, modified=(PATCHED,))
    with pytest.raises(services.ChangeRefused) as refused:
        request(operator, deployment, snapshot, kind="model_swap", model=catalog["INT4"])
    assert refused.value.details == {"needs_integrity_acknowledgement": True}
    assert "1 modified" in refused.value.message and PATCHED in refused.value.message
    change = request(
        operator, deployment, snapshot, kind="model_swap", model=catalog["INT4"],
        acknowledge_integrity=True,
    )  # fmt: skip
    assert change.params["integrity_acknowledged"]["snapshot"] == snapshot.pk
    event = AuditEvent.objects.get(action="change.integrity_acknowledged")
    assert event.actor == operator.username and PATCHED in event.data["found"]


def test_a_swap_on_a_clean_engine_needs_no_acknowledgement(operator, deployment, host, catalog):
    snapshot = f.make_integrity_snapshot(host)
    change = request(operator, deployment, snapshot, kind="model_swap", model=catalog["INT4"])
    assert "integrity_acknowledged" not in change.params


def test_a_restart_on_a_patched_engine_goes_ahead(operator, deployment, host):
    # Only a new revision is blamed for what a patch does; a restart changes nothing served.
    change = request(
        operator, deployment, f.make_integrity_snapshot(host, modified=(PATCHED,)), kind="restart"
    )
    assert change.status == ChangeStatus.QUEUED


def test_a_busy_and_patched_server_names_both_acknowledgements(operator, deployment, host, catalog):
    parsed = f.parsed_state(running=4)
    parsed["deployments"][f.UNIT]["integrity"] = {
        "dist": "vllm", "version": "0.11.2", "checked": 3, "modified": [PATCHED], "missing": [],
        "added": [], "error": None,
    }  # fmt: skip
    snapshot = f.make_snapshot(host, parsed=parsed, includes_integrity=True)
    with pytest.raises(services.ChangeRefused) as refused:
        request(operator, deployment, snapshot, kind="model_swap", model=catalog["INT4"])
    assert refused.value.details == {
        "needs_acknowledgement": True,
        "needs_integrity_acknowledgement": True,
    }
    assert refused.value.message.startswith("the server has 4 requests in flight; the engine")


def test_another_engine_version_at_execution_is_drift(operator, approver, deployment, host):
    from deployments.execution.drift import execution_drift

    decided = f.make_integrity_snapshot(host, modified=(PATCHED,), version="0.11.1")
    change = request(operator, deployment, decided)
    now = f.make_integrity_snapshot(host, modified=(PATCHED,), version="0.11.2")
    report = execution_drift(change=change, basis=decided, current=now)
    assert report == [
        {
            "field": f"{f.UNIT} engine package",
            "before": "vllm==0.11.1",
            "after": "vllm==0.11.2",
            "why": "an engine repair reinstalls exactly the version that was decided on",
        }
    ]
    unchecked = f.make_snapshot(host)
    (entry,) = execution_drift(change=change, basis=decided, current=unchecked)
    assert entry["after"] == "unreadable (not checked)"
