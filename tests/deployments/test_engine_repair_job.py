"""Engine repair jobs on the simulator, in this process: what is sent, in which order, and what
a failed reinstall leaves behind."""

from __future__ import annotations

import pytest

from deployments import services
from deployments.choices import ChangeStatus
from deployments.execution import runner
from hosts import services as host_services
from hosts.models import Host
from simulator import catalog
from tests.fleet import register

pytestmark = pytest.mark.integration
UNIT = "vllm-kimi-k25.service"


def probe(host, *, integrity=False):
    host = Host.objects.select_related("credential").get(pk=host.pk)
    return host_services.host_probe(host=host, trigger="manual", integrity=integrity)


@pytest.fixture
def patched(db, make_fleet, settings):
    settings.HEALTH_POLL_SECONDS = 0.1
    fleet = register(make_fleet(1, time_scale=0.05))
    fleet.set_patched_engine("gpu-01")
    return fleet


def repair(operator, approver, fleet):
    deployment = fleet.deployments[0]
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="engine_repair",
        snapshot=probe(deployment.host, integrity=True), reason="stale patches",
    )  # fmt: skip
    services.change_request_approve(
        change=change, approver=approver, snapshot=probe(deployment.host), reason="ok"
    )
    fleet.clear_command_log("gpu-01")
    runner.change_execute(change_id=change.pk)
    change.refresh_from_db()
    return change


def test_a_repair_reinstalls_checks_then_restarts(patched, operator, approver):
    change = repair(operator, approver, patched)
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    log = patched.command_log("gpu-01")
    pip = next(i for i, c in enumerate(log) if "-m pip install" in c)
    assert log[pip].startswith("sudo -n /opt/vllm/.venv/bin/python3 -m pip install --force")
    assert log[pip].endswith(f" vllm=={catalog.VLLM_VERSION} 2>&1")
    restart = next(i for i, c in enumerate(log) if "systemctl restart" in c)
    check = next(i for i, c in enumerate(log[pip:]) if "-I -c" in c) + pip
    assert pip < check < restart
    names = [s.name for s in change.steps.all()]
    assert names.index("baseline: coherence suite on revision 1") < names.index(
        f"reinstall vllm=={catalog.VLLM_VERSION}"
    )


def test_a_repair_from_a_wheel_directory(patched, operator, approver):
    deployment = patched.deployments[0]
    deployment.engine_package_source = catalog.WHEEL_DIR
    deployment.save(update_fields=["engine_package_source"])
    patched.set_fault("gpu-01", "pip_index_unreachable")  # the index does not matter
    change = repair(operator, approver, patched)
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    pip = next(c for c in patched.command_log("gpu-01") if "-m pip install" in c)
    assert f"--no-index --find-links {catalog.WHEEL_DIR} vllm==" in pip


def test_an_unreachable_index_fails_the_repair_before_any_restart(patched, operator, approver):
    patched.set_fault("gpu-01", "pip_index_unreachable")
    change = repair(operator, approver, patched)
    assert change.status == ChangeStatus.FAILED
    assert "-m pip install" in change.status_reason and "exited 1" in change.status_reason
    assert not any("systemctl restart" in c for c in patched.command_log("gpu-01"))
    # What the host looked like then is kept; nothing was restored, so it is also the after.
    assert change.failure_snapshot_id is not None
    assert change.after_snapshot_id == change.failure_snapshot_id
    step = change.steps.get(name__startswith="reinstall")
    assert step.status == "failed" and "Network is unreachable" in step.output
