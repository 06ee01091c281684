"""Each change kind is declared once (deployments.kinds), and an undeclared one is refused
everywhere instead of falling through to a restart."""

from __future__ import annotations

import pytest
from django.test import override_settings

from deployments import kinds, services
from deployments.choices import ChangeKind, ChangeStatus
from deployments.execution import plan
from deployments.execution.job import Job
from deployments.models import ChangeRequest
from deployments.system_checks import check_approval_required_kinds
from tests import factories as f


def test_every_kind_is_declared_and_nothing_else_is() -> None:
    assert set(kinds.KINDS) == set(ChangeKind.values)
    assert all(spec.kind.value == key for key, spec in kinds.KINDS.items())


def test_an_undeclared_kind_raises() -> None:
    with pytest.raises(kinds.UnknownChangeKind, match="unknown change kind 'drain'"):
        kinds.spec("drain")


def test_what_the_declarations_say() -> None:
    assert kinds.kinds_where("writes_revision") == {"redeploy", "model_swap", "rollback"}
    assert kinds.kinds_where("serves") == set(ChangeKind.values) - {"stop"}
    assert kinds.kinds_where("partial_snapshot_ok") == {"stop", "restart"}
    assert kinds.kinds_where("always_approved") == {"engine_repair"}
    assert kinds.kinds_where("shapes") == {"redeploy", "model_swap"}
    assert not kinds.spec("start").drops_inflight
    assert {k: s.systemctl for k, s in kinds.KINDS.items()} == {
        "stop": "stop", "start": "start", "restart": "restart", "redeploy": "restart",
        "model_swap": "restart", "rollback": "restart", "engine_repair": "restart",
    }  # fmt: skip


@pytest.mark.django_db
def test_a_job_of_an_undeclared_kind_touches_nothing(deployment) -> None:
    change = ChangeRequest.objects.create(
        host=deployment.host, deployment=deployment, kind="drain",
        snapshot=f.make_snapshot(deployment.host), reason="r", requested_by_name="otto",
        needs_approval=False, params_digest="-", correlation_id="c",
        status=ChangeStatus.RUNNING,
    )  # fmt: skip
    job = Job(change)
    with pytest.raises(kinds.UnknownChangeKind):
        plan.apply(job)
    assert not change.steps.exists()  # not one step, so not one command


@pytest.mark.parametrize(
    ("kind", "fields", "expected"),
    [
        ("model_swap", {}, {"model": "A model swap needs the model to swap to."}),
        ("restart", {"model": True}, {"model": "Only a model swap takes a model."}),
        ("restart", {"benchmark": True}, {}),
        ("stop", {"benchmark": True}, {"benchmark": "A stop serves nothing to benchmark."}),
        (
            "rollback",
            {"shaped": ["max_model_len"]},
            {
                "max_model_len": "Only a redeploy and a model swap take this: a roll back "
                "reshapes nothing."
            },
        ),
        ("redeploy", {"shaped": ["max_model_len", "environment"]}, {}),
    ],
)
def test_the_request_rules_are_written_once(kind, fields, expected) -> None:
    given = {"model": False, "shaped": [], "benchmark": False, **fields}
    assert kinds.request_field_errors(kind, **given) == expected


@pytest.mark.django_db
def test_the_service_refuses_what_the_kind_does_not_take(deployment, operator) -> None:
    with pytest.raises(services.ChangeRefused) as refused:
        services.change_request_create(
            user=operator, deployment=deployment, kind="restart",
            snapshot=f.make_snapshot(deployment.host), reason="r", max_model_len=4096,
        )  # fmt: skip
    assert refused.value.details["fields"] == {
        "max_model_len": "Only a redeploy and a model swap take this: a restart reshapes nothing."
    }


def test_a_misspelt_approval_kind_is_an_error_at_start_up() -> None:
    with override_settings(APPROVAL_REQUIRED_KINDS=["model_swap", "modelswap"]):
        (error,) = check_approval_required_kinds()
    assert error.id == "deployments.E002" and "'modelswap' is not a change kind" in error.msg
    with override_settings(APPROVAL_REQUIRED_KINDS=["model_swap", "engine_repair"]):
        assert check_approval_required_kinds() == []
