"""The change rules with host groups, in the services: requesting needs the operator role on
the deployment's host, approving and rejecting the approver role on the change's host,
cancelling the requester's or an approver's operator role there, a GPU diagnostic the operator
role; a host outside a person's scope is not found, one inside it without the role forbidden,
naming the role and the host."""

from __future__ import annotations

import pytest
from django.template import Context, Template

from controlplane.audit.models import AuditEvent
from deployments import services
from deployments.choices import ChangeStatus
from deployments.services import diagnostics

pytestmark = pytest.mark.django_db


def swap(user, teams, name):
    return services.change_request_create(
        user=user, deployment=teams.deployments[name], kind="model_swap",
        snapshot=teams.snapshots[name], reason="INT4 serves more tokens per second",
        model=teams.catalog["INT4"],
    )  # fmt: skip


def refusal(call, *args):
    with pytest.raises(services.ChangeRefused) as refused:
        call(*args)
    return refused.value.code, refused.value.message


def test_requesting_needs_the_operator_role_on_the_deployments_host(teams, scoped):
    tess = scoped("tess", "operator", "team-a", "viewer", "prod")
    assert swap(tess, teams, "gpu-03").status == ChangeStatus.PENDING_APPROVAL
    assert refusal(swap, tess, teams, "gpu-01") == (
        "forbidden",
        "Requesting a change needs the operator role on gpu-01.",
    )
    ann = scoped("ann", "operator", "team-a")
    assert refusal(swap, ann, teams, "gpu-01") == ("not_found", "No such deployment.")
    assert AuditEvent.objects.filter(action="change.requested").count() == 1


def test_approving_and_rejecting_need_the_approver_role_on_the_changes_host(
    teams, scoped, operator
):
    on_prod, on_a = swap(operator, teams, "gpu-01"), swap(operator, teams, "gpu-03")
    prod_approver = scoped("pia", "approver", "prod", "viewer", "team-a")
    approve = services.change_request_approve
    assert refusal(
        lambda: approve(change=on_a, approver=prod_approver, snapshot=teams.snapshots["gpu-03"],
                        reason="looks right")
    ) == ("forbidden", "Approving a change needs the approver role on gpu-03.")  # fmt: skip
    reject = services.change_request_reject
    assert refusal(lambda: reject(change=on_a, approver=prod_approver, reason="not now")) == (
        "forbidden",
        "Rejecting a change needs the approver role on gpu-03.",
    )
    outside = scoped("out", "approver", "prod")
    assert refusal(lambda: reject(change=on_a, approver=outside, reason="not now")) == (
        "not_found",
        "No such change.",
    )
    approved = approve(
        change=on_prod, approver=prod_approver, snapshot=teams.snapshots["gpu-01"], reason="ok"
    )
    assert approved.status == ChangeStatus.QUEUED


def test_cancelling_needs_the_operator_role_on_the_changes_host(teams, scoped, operator):
    change = swap(operator, teams, "gpu-01")
    # an approver and operator, but of team-a: the change is prod's
    other_team = scoped("otto-a", "operator", "team-a", "approver", "team-a", "viewer", "prod")
    assert refusal(lambda: services.change_request_cancel(change=change, user=other_team)) == (
        "forbidden",
        "Cancelling a change needs the operator role on gpu-01.",
    )
    assert refusal(
        lambda: services.change_request_cancel(
            change=change, user=scoped("ann", "operator", "team-a")
        )
    ) == ("not_found", "No such change.")
    prod_lead = scoped("pat", "operator", "prod", "approver", "prod")
    assert services.change_request_cancel(change=change, user=prod_lead).status == "cancelled"


def test_a_gpu_diagnostic_needs_the_operator_role_on_the_host(teams, scoped):
    tess = scoped("tess", "operator", "team-a", "viewer", "prod")
    assert refusal(
        lambda: diagnostics.gpu_diagnostic_request(host=teams.hosts["gpu-01"], level=1, user=tess)
    ) == ("forbidden", "Running a GPU diagnostic needs the operator role on gpu-01.")
    assert not AuditEvent.objects.filter(action="host.gpu_diagnostic_requested").exists()


def test_the_first_gate_is_the_role_anywhere(teams, scoped, viewer):
    tess = scoped("tess", "operator", "team-a")
    services.change_request_create_allowed(user=tess)  # an operator somewhere
    code, message = refusal(lambda: services.change_request_create_allowed(user=viewer))
    assert code == "forbidden" and "operator role" in message


def test_pages_offer_the_buttons_the_services_allow(teams, scoped, operator):
    tess = scoped("tess", "operator", "team-a", "approver", "team-a", "viewer", "prod")
    change = swap(operator, teams, "gpu-01")
    template = Template(
        "{% load change_rules %}{{ user|may_request:a }} {{ user|may_request:p }} "
        "{{ user|may_approve:p }} {{ user|may_cancel:change }} "
        "{{ user|may_run_gpu_diagnostic:a }} {{ user|may_run_gpu_diagnostic:p }}"
    )
    hosts = teams.hosts
    shown = template.render(
        Context({"user": tess, "a": hosts["gpu-03"], "p": hosts["gpu-01"], "change": change})
    )
    assert shown == "True False False False True False"
