"""The server's refusals through cpctl: its words on stderr, its JSON under --json, and an exit
code per kind of refusal (stale 6, drift 7, refused 5, auth 3, not found 4). Rows from the
factories, the live server real; no host is contacted."""

from __future__ import annotations

import pytest

from controlplane.cli.exits import ExitCode
from deployments import services as change_services
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest
from tests import factories as f


@pytest.fixture
def deployment(db):
    catalog = f.make_catalog()
    return f.make_deployment(f.make_host("gpu-01", port=1), catalog["NVFP4"])


@pytest.fixture
def swap(deployment, operator):
    """A model swap to INT4, waiting for approval, on a fresh snapshot."""
    from deployments.models import ModelArtifact

    return change_services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap",
        snapshot=f.make_snapshot(deployment.host), reason="INT4 serves more tokens per second",
        model=ModelArtifact.objects.get(variant="INT4"),
    )  # fmt: skip


def test_a_stale_snapshot_is_exit_6_with_the_servers_words(cpctl_as, operator, deployment):
    old = f.make_snapshot(deployment.host, age=900)
    cpctl = cpctl_as(operator)
    args = ["changes", "request", "restart", "--deployment", str(deployment.pk),
            "--snapshot", str(old.pk), "--reason", "apply the patched engine"]  # fmt: skip
    ran = cpctl(*args)
    assert ran.code == ExitCode.STALE, ran
    assert "the limit is 300 s" in ran.err and "[stale]" in ran.err
    assert "resting on snapshot" in ran.err  # what it decided on, said before it asked
    ran = cpctl(*args, "--json")
    assert ran.code == ExitCode.STALE, ran
    body = ran.json()
    assert body["code"] == "stale" and body["limit_seconds"] == 300
    assert not ChangeRequest.objects.exists()


def test_approving_on_a_changed_host_is_exit_7_with_the_drift_report(cpctl_as, approver, swap):
    f.make_snapshot(swap.host, parsed=f.parsed_state(main_pid=777))  # the newest: it changed
    ran = cpctl_as(approver)(
        "changes", "approve", str(swap.pk), "--snapshot", "latest", "--reason", "fits"
    )
    assert ran.code == ExitCode.DRIFT, ran
    assert "main_pid" in ran.err and "777" in ran.err, ran
    swap.refresh_from_db()
    assert swap.status == ChangeStatus.DRIFTED


def test_approving_your_own_request_is_exit_3_the_two_person_rule(cpctl_as, operator, swap):
    # The operator who requested it also holds the approver role here: the rule, not the role.
    from django.contrib.auth.models import Group

    operator.groups.add(Group.objects.get(name="approver"))
    ran = cpctl_as(operator)(
        "changes", "approve", str(swap.pk), "--snapshot", "latest", "--reason", "mine"
    )
    assert ran.code == ExitCode.AUTH, ran
    assert "two-person rule" in ran.err
    swap.refresh_from_db()
    assert swap.status == ChangeStatus.PENDING_APPROVAL


def test_invalid_input_is_exit_5_naming_the_field(cpctl_as, operator, approver, swap):
    ran = cpctl_as(operator)(
        "changes", "request", "model_swap", "--host", "gpu-01", "--snapshot", "latest",
        "--reason", "swap it",
    )  # fmt: skip
    assert ran.code == ExitCode.REFUSED, ran
    assert "model_id" in ran.err and "needs the model to swap to" in ran.err
    ran = cpctl_as(approver)("changes", "reject", str(swap.pk), "--reason", "   ")
    assert ran.code == ExitCode.REFUSED, ran
    assert "reason" in ran.err


def test_a_second_open_request_is_a_conflict_exit_5(cpctl_as, operator, swap):
    ran = cpctl_as(operator)(
        "changes", "request", "restart", "--host", "gpu-01", "--snapshot", "latest",
        "--reason", "again",
    )  # fmt: skip
    assert ran.code == ExitCode.REFUSED, ran
    assert "[conflict]" in ran.err


def test_no_such_change_is_exit_4_and_a_bad_token_exit_3(cpctl_as, viewer, swap):
    cpctl = cpctl_as(viewer)
    ran = cpctl("changes", "show", "999999")
    assert ran.code == ExitCode.NOT_FOUND, ran
    assert "No such change." in ran.err
    ran = cpctl("changes", "show", str(swap.pk), env={"CPCTL_TOKEN": "cpt_00000000_forged"})
    assert ran.code == ExitCode.AUTH, ran
    assert "Invalid, expired or revoked token." in ran.err
    # A viewer may read but not decide: the role, in the server's words.
    ran = cpctl("changes", "cancel", str(swap.pk))
    assert ran.code == ExitCode.AUTH, ran


def test_a_change_reads_as_a_table_and_as_the_apis_json(cpctl_as, viewer, swap):
    cpctl = cpctl_as(viewer)
    ran = cpctl("changes", "list")
    assert ran.code == 0, ran
    assert f"{swap.pk}" in ran.out and "pending_approval" in ran.out and "model_swap" in ran.out
    listed = cpctl("changes", "list", "--status", "pending_approval", "--json").json()
    assert [c["id"] for c in listed] == [swap.pk]
    shown = cpctl("changes", "show", str(swap.pk), "--json").json()
    assert shown["id"] == swap.pk and shown["status"] == "pending_approval"
    assert shown["target_revision"]["model"]["variant"] == "INT4"
