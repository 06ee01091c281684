"""`cpctl changes request` with what a request may carry besides its kind: a drain hook by name
and its deadline, and a rollback's target revision. The server decides; cpctl sends the fields
and says the server's words. Rows from the factories, the live server real; no host is
contacted."""

from __future__ import annotations

import pytest

from controlplane.cli.exits import ExitCode
from deployments.choices import DrainHookKind
from deployments.models import ChangeRequest, DrainHook
from tests import factories as f


@pytest.fixture
def deployment(db):
    catalog = f.make_catalog()
    return f.make_deployment(f.make_host("gpu-01", port=1), catalog["NVFP4"])


@pytest.fixture
def hook(db) -> DrainHook:
    return DrainHook.objects.create(
        name="lb",
        kind=DrainHookKind.COMMAND,
        drain_command="/usr/local/bin/lb-drain out --backend {host}",
        undrain_command="/usr/local/bin/lb-drain in --backend {host}",
    )


def request(cpctl, deployment, *extra: str):
    f.make_snapshot(deployment.host)
    return cpctl(
        "changes", "request", "restart", "--deployment", str(deployment.pk), "--snapshot",
        "latest", "--reason", "pick up the new driver", "--json", *extra,
    )  # fmt: skip


def test_a_drain_hook_and_deadline_reach_the_request(cpctl_as, operator, deployment, hook):
    ran = request(cpctl_as(operator), deployment, "--drain-hook", "lb", "--drain-deadline", "120")
    assert ran.code == ExitCode.OK, ran
    change = ChangeRequest.objects.get(pk=ran.json()["id"])
    assert change.params["drain"]["hook_name"] == "lb"
    assert change.params["drain"]["deadline_seconds"] == 120


def test_an_unknown_hook_and_a_deadline_out_of_bounds_are_refused(
    cpctl_as, operator, deployment, hook
):
    cpctl = cpctl_as(operator)
    unknown = request(cpctl, deployment, "--drain-hook", "nosuch")
    assert unknown.code == ExitCode.REFUSED, unknown
    assert "drain_hook" in unknown.json()
    too_long = request(cpctl, deployment, "--drain-hook", "lb", "--drain-deadline", "99999")
    assert too_long.code == ExitCode.REFUSED, too_long
    assert "drain_deadline_seconds" in too_long.json()
    assert not ChangeRequest.objects.exists()


def test_a_rollback_names_its_revision(cpctl_as, operator, deployment):
    f.make_snapshot(deployment.host)
    ran = cpctl_as(operator)(
        "changes", "request", "rollback", "--deployment", str(deployment.pk), "--snapshot",
        "latest", "--reason", "back to what served", "--revision", "99",
    )  # fmt: skip
    assert ran.code == ExitCode.REFUSED, ran
    assert "no revision 99" in ran.err, ran
