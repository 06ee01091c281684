"""The change page leads with what is decided and what happened, puts the decision beside it,
answers a reason that is not words in its own words, offers break-glass only to an
administrator who cannot simply approve, asks before Cancel, and folds the raw output."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from deployments import services
from deployments.choices import ChangeStatus, StepStatus
from deployments.models import ChangeRequest, JobStep
from tests import factories as f
from tests.conftest import _user
from tests.deployments.rollouts.conftest import end_change

pytestmark = pytest.mark.django_db


def swap(user, deployment, catalog, *, age=42.0):
    return services.change_request_create(
        user=user, deployment=deployment, kind="model_swap",
        snapshot=f.make_snapshot(deployment.host, age=age), reason="INT4 is faster",
        model=catalog["INT4"],
    )  # fmt: skip


def page(client, user, change, status=200):
    client.force_login(user)
    response = client.get(reverse("deployments:change", args=[change.pk]))
    assert response.status_code == status
    return response.content.decode()


def position(body, marker):
    assert marker in body, marker
    return body.index(marker)


def test_it_leads_with_what_is_decided_then_the_decision_then_the_evidence(
    client, operator, approver, deployment, catalog
):
    change = swap(operator, deployment, catalog)
    f.make_snapshot(deployment.host)  # the approver decides on the latest
    body = page(client, approver, change)
    lead = body[position(body, 'id="change-summary"') : position(body, 'id="approval-panel"')]
    rests_on = re.search(r'id="rests-on">(.*?)</dd>', lead, re.S).group(1)
    assert f">#{change.snapshot_id}</a>" in rests_on
    said = r"<strong>4[23] s old</strong> when requested \(the limit is 300 s\)"
    assert re.search(said, rests_on)
    requested = lead[position(lead, 'id="preflight-when-requested"') :]
    assert "✓ Memory: fits (tensor-parallel 8)" in requested
    assert "Idle: no requests in flight" in requested
    assert "every model swap needs a second person" in lead
    assert "moonshotai/Kimi-K2.5 (INT4)" in lead
    # the decision before the evidence, and long before any raw output
    order = ["change-summary", "approval-panel", "review-details", "evaluations", "step-log"]
    places = [position(body, f'id="{marker}"') for marker in order]
    assert places == sorted(places)


def test_a_finished_change_says_what_happened_before_and_after(
    client, operator, approver, viewer, deployment, catalog
):
    change = swap(operator, deployment, catalog)
    services.change_request_approve(
        change=change, approver=approver, snapshot=f.make_snapshot(deployment.host),
        reason="fits",
    )  # fmt: skip
    end_change(ChangeRequest.objects.get(pk=change.pk), bench=(1097.0, 2189.0))
    body = page(client, viewer, change)
    summary = body[position(body, 'id="evaluation-summary"') : position(body, 'id="outcome"')]
    none = '<span class="muted">\u2013</span>'
    assert re.search(r"coherence suite</strong>:\s*before\s*" + none, summary)
    assert "passed 6 of 6 checks" in summary
    assert summary.count("4 levels") == 2  # the benchmark, before and after
    lead = body[: position(body, 'id="outcome"')]
    assert re.search(r"approved by anna at [\d:]+ UTC: \u201cfits\u201d", lead)
    assert 'id="approval-panel"' not in body  # nothing left to decide


@pytest.mark.parametrize(
    ("who", "approve", "break_glass", "says"),
    [
        ("approver", True, False, "Your decision"),
        ("admin", True, False, "Your decision"),  # a second person: no glass to break
        ("requesting admin", False, True, 'id="own-request"'),
        ("requester", False, False, 'id="own-request"'),
        ("viewer", False, False, 'id="no-decision"'),
    ],
)
def test_each_person_is_offered_the_decisions_they_may_make(
    client, operator, approver, viewer, admin_user, deployment, catalog,
    who, approve, break_glass, says,
):  # fmt: skip
    requester = admin_user if who == "requesting admin" else operator
    change = swap(requester, deployment, catalog)
    f.make_snapshot(deployment.host)
    people = {"approver": approver, "requesting admin": admin_user, "requester": operator,
              "viewer": viewer}  # fmt: skip
    person = people[who] if who in people else _user("root2", superuser=True)
    panel = page(client, person, change)
    panel = panel[position(panel, 'id="approval-panel"') : position(panel, 'id="review-details"')]
    assert ('id="approve-form"' in panel) is approve
    assert ('id="reject-form"' in panel) is approve  # a requester withdraws with Cancel
    assert ('id="break-glass"' in panel) is break_glass
    assert "Approve without a second person" not in panel
    assert says in panel


@pytest.mark.parametrize(("decision", "typed"), [("approve", ""), ("reject", "  \u200b ")])
def test_a_reason_that_is_not_words_is_answered_beside_it_and_decides_nothing(
    client, operator, approver, deployment, catalog, decision, typed
):
    change = swap(operator, deployment, catalog)
    latest = f.make_snapshot(deployment.host)
    client.force_login(approver)
    response = client.post(
        reverse(f"deployments:{decision}", args=[change.pk]),
        {"snapshot_id": latest.pk, "reason": typed},
    )
    assert response.status_code == 400
    body = response.content.decode()
    form = body[position(body, f'id="{decision}-form"') :].split("</form>", 1)[0]
    assert f'<p class="field-error" id="{decision}-reason-error" role="alert">' in form
    assert "needs visible text" in form
    # the page answers, not the browser's "Please fill out this field" bubble alone
    assert re.search(rf'<form [^>]*novalidate id="{decision}-form">', body)
    change.refresh_from_db()
    assert change.status == ChangeStatus.PENDING_APPROVAL


def test_cancel_asks_first(client, operator, deployment, catalog):
    change = swap(operator, deployment, catalog)
    body = page(client, operator, change)
    cancel = body[position(body, 'id="cancel-form"') :].split(">", 1)[0]
    assert f'data-confirm="Cancel change #{change.pk} (model swap on gpu-01)?' in cancel


def test_raw_output_is_folded_and_a_failed_steps_is_open(client, viewer, deployment, catalog):
    change = ChangeRequest.objects.get(pk=swap(_user("ops", "operator"), deployment, catalog).pk)
    now = timezone.now()
    for seq, status in ((1, StepStatus.SUCCEEDED), (2, StepStatus.FAILED)):
        JobStep.objects.create(
            change=change, seq=seq, name=f"step {seq}", status=status, command="curl -s x",
            output="x" * 5000, exit_status=0 if seq == 1 else 7, started_at=now,
            finished_at=now + dt.timedelta(seconds=1),
        )  # fmt: skip
    body = page(client, viewer, change)
    assert '<details class="step-output" id="step-output-1"><summary>' in body
    assert '<details class="step-output" id="step-output-2" open><summary>' in body
    assert "command and output · exit 7" in body
    assert '<details class="fold" id="change-events-all">' in body


def test_the_live_answer_brings_the_lead_along(client, operator, deployment, catalog):
    change = swap(operator, deployment, catalog)
    client.force_login(operator)
    response = client.get(
        reverse("deployments:change", args=[change.pk]), {"fragment": "live"},
        headers={"HX-Request": "true"},
    )  # fmt: skip
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="change-live"')
    assert '<section class="card story" id="change-summary" hx-swap-oob="true">' in body
