"""Reasons are words: every path that takes a reason refuses one a reader cannot see."""

from __future__ import annotations

import asyncssh
import pytest
from django.core.exceptions import ValidationError

from controlplane.audit.models import AuditEvent
from controlplane.audit.reasons import validate_reason, visible_characters
from deployments import services
from deployments.choices import ChangeStatus
from deployments.models import ChangeRequest
from hosts import services as host_services
from hosts.models import Host
from tests import factories as f

INVISIBLE = [
    "",
    "   \t\n",
    "\u200b" * 12,  # zero-width spaces
    "\u200b\u200c\u200d\u2060\ufeff",  # zero-width (non-)joiners, word joiner, BOM
    "\u202e\u202d\u2066\u2069",  # bidi controls
    "\u3164\u115f\u1160\uffa0",  # Hangul fillers
    "\u2800\u2800\u2800",  # braille blank
    "\u00a0\u2003\u3000",  # no-break, em and ideographic spaces
    "\u0301\u0308\u20dd",  # combining marks with nothing to sit on
    "\x00\x07\x1b\x7f",  # control characters
    "...",  # punctuation alone is not a reason either
]


@pytest.mark.parametrize("text", INVISIBLE)
def test_text_a_reader_cannot_see_is_no_reason(text: str) -> None:
    with pytest.raises(ValidationError):
        validate_reason(text)


@pytest.mark.parametrize(
    "text", ["patch CVE-2026-1234", "ok", "修复", "x\u200b", "  padded  ", "5", "été"]
)
def test_words_in_any_script_are_a_reason(text: str) -> None:
    assert validate_reason(text) == text.strip()


def test_a_minimum_counts_visible_characters_only() -> None:
    assert visible_characters("a\u200bb\u200bc") == "abc"
    with pytest.raises(ValidationError, match="at least 10 visible characters"):
        validate_reason("pager\u200b\u200b\u200b\u200b\u200b", minimum=10)
    assert validate_reason("pager is on fire", minimum=10) == "pager is on fire"


# --- every path uses it ---------------------------------------------------------------------

ZWSP = "\u200b" * 12


@pytest.fixture
def swap(operator, deployment, catalog):
    return services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap",
        snapshot=f.make_snapshot(deployment.host), reason="INT4 is faster", model=catalog["INT4"],
    )  # fmt: skip


def test_a_request_needs_a_visible_reason(operator, deployment):
    with pytest.raises(services.ChangeRefused, match="change request needs visible text"):
        services.change_request_create(
            user=operator, deployment=deployment, kind="restart",
            snapshot=f.make_snapshot(deployment.host), reason=ZWSP,
        )  # fmt: skip
    assert not ChangeRequest.objects.exists()


def test_an_approval_needs_a_visible_reason(swap, approver):
    with pytest.raises(services.ChangeRefused, match="approval needs visible text"):
        services.change_request_approve(
            change=swap, approver=approver, snapshot=f.make_snapshot(swap.host), reason=ZWSP
        )
    swap.refresh_from_db()
    assert swap.status == ChangeStatus.PENDING_APPROVAL and not swap.approvals.exists()


def test_a_rejection_needs_a_visible_reason(swap, approver):
    with pytest.raises(services.ChangeRefused, match="rejection needs visible text"):
        services.change_request_reject(change=swap, approver=approver, reason=ZWSP)
    swap.refresh_from_db()
    assert swap.status == ChangeStatus.PENDING_APPROVAL


def test_break_glass_needs_ten_visible_characters(swap, admin_user):
    # Seen in a review: twelve zero-width spaces were accepted and the change ran.
    with pytest.raises(services.ChangeRefused, match="at least 10 visible characters"):
        services.change_request_break_glass(
            change=swap, admin=admin_user, snapshot=f.make_snapshot(swap.host), reason=ZWSP
        )
    swap.refresh_from_db()
    assert swap.status == ChangeStatus.PENDING_APPROVAL
    assert not AuditEvent.objects.filter(action="change.break_glass").exists()


def test_accepting_a_host_key_needs_a_visible_reason(db, admin_user):
    public = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    host = Host.objects.create(name="gpu-key", address="127.0.0.1", presented_host_key=public)
    with pytest.raises(host_services.HostRefused, match="accepting a host key needs visible"):
        host_services.host_key_accept(
            host=host,
            actor=admin_user,
            reason=ZWSP,
            reviewed_fingerprint=host.presented_key_fingerprint,
        )
    host.refresh_from_db()
    assert host.host_key == "" and not AuditEvent.objects.filter(action="host.key_accepted")


def test_the_api_answers_400_for_an_invisible_approval_reason(swap, approver):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(approver)
    response = client.post(
        f"/api/v1/changes/{swap.pk}/approve/",
        {"snapshot_id": f.make_snapshot(swap.host).pk, "reason": ZWSP},
        format="json",
    )
    assert response.status_code == 400
    assert "visible text" in response.json()["detail"]
