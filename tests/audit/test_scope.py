"""The audit log with host groups: the history, an event and its story, a host's timeline and
both exports leave out events about hosts outside a person's scope, exactly as if they did not
exist; events about no host stay. And who is in which group, and who holds which role where,
is itself audited, whichever page or command changed it."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from controlplane.accounts.models import GroupRoleMapping, HostGroup, RoleGrant
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent

pytestmark = pytest.mark.django_db


def streamed(response) -> str:
    assert response.status_code == 200
    return b"".join(response.streaming_content).decode()


@pytest.fixture
def accepted(teams) -> dict[str, AuditEvent]:
    """One event about each host (the same correlation id: one story), and one about none."""
    with audit_context_of("story-1"):
        made = {n: audit.record(action=AuditAction.HOST_KEY_ACCEPTED, target=h)
                for n, h in teams.hosts.items()}  # fmt: skip
        made["none"] = audit.record(action=AuditAction.WEBHOOK_TEST_SENT, actor="system:test")
    return made


def audit_context_of(correlation: str):
    from controlplane.audit import context

    return context.acting("system:test", correlation_id=correlation)


def test_the_history_and_its_exports_hold_the_scopes_events(client, accepted, scoped):
    client.force_login(scoped("ann", "viewer", "team-a"))
    body = client.get(reverse("audit:history"), {"action": "host.key_accepted"}).content.decode()
    shown = set(re.findall(r'<tr id="event-(\d+)">', body))
    assert shown == {str(accepted["gpu-02"].seq), str(accepted["gpu-03"].seq)}
    everything = client.get(reverse("audit:history")).content.decode()
    assert f'id="event-{accepted["none"].seq}"' in everything  # about no host: stays
    assert f'id="event-{accepted["gpu-01"].seq}"' not in everything
    lines = streamed(client.get(reverse("audit:export_jsonl"))).splitlines()
    seqs = {json.loads(line)["seq"] for line in lines}
    assert accepted["gpu-01"].seq not in seqs and accepted["gpu-03"].seq in seqs
    rows = csv.DictReader(io.StringIO(streamed(client.get(reverse("audit:export_csv")))))
    assert "gpu-01" not in {row["host_label"] for row in rows}


def test_an_event_and_a_timeline_of_a_host_outside_the_scope_are_not_found(
    client, teams, accepted, scoped
):
    client.force_login(scoped("ann", "viewer", "team-a"))
    assert client.get(reverse("audit:event", args=[accepted["gpu-01"].seq])).status_code == 404
    story = client.get(reverse("audit:event", args=[accepted["gpu-03"].seq])).content.decode()
    assert f'href="/audit/events/{accepted["gpu-02"].seq}/"' in story
    assert f'href="/audit/events/{accepted["gpu-01"].seq}/"' not in story  # same story, hidden
    hidden = reverse("audit:host_timeline", args=[teams.hosts["gpu-01"].pk])
    assert client.get(hidden).status_code == 404
    mine = reverse("audit:host_timeline", args=[teams.hosts["gpu-03"].pk])
    assert client.get(mine).status_code == 200


def test_a_host_joining_and_leaving_a_group_is_audited_per_host(teams, admin_user):
    start = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first()
    teams.prod.hosts.add(teams.hosts["gpu-03"])
    teams.hosts["gpu-01"].groups.remove(teams.prod)  # from the host's side
    teams.team_a.hosts.clear()
    found = [
        (e.host_label, e.data["change"], e.data["group"])
        for e in AuditEvent.objects.filter(seq__gt=start, action="hostgroup.hosts_changed")
        .order_by("seq")
    ]  # fmt: skip
    assert found == [
        ("gpu-03", "add", "prod"),
        ("gpu-01", "remove", "prod"),
        ("gpu-02", "remove", "team-a"),
        ("gpu-03", "remove", "team-a"),
    ]


def test_roles_granted_on_a_group_are_role_changes(teams, viewer):
    grant = RoleGrant.objects.create(user=viewer, role="operator", host_group=teams.team_a)
    grant.host_group = teams.prod
    grant.save()
    grant.delete()
    changes = [
        e.data
        for e in AuditEvent.objects.filter(action="user.roles_changed", target_label="vera")
        .order_by("seq")
    ]  # fmt: skip
    assert changes[-3:] == [
        {"change": "add", "grant": {"role": "operator", "host_group": "team-a"}},
        {
            "change": "changed",
            "before": {"role": "operator", "host_group": "team-a"},
            "after": {"role": "operator", "host_group": "prod"},
        },
        {"change": "remove", "grant": {"role": "operator", "host_group": "prod"}},
    ]


def test_groups_and_mappings_managed_in_the_admin_are_audited(client, admin_user, teams):
    client.force_login(admin_user)
    response = client.post(
        reverse("admin:accounts_hostgroup_add"),
        {
            "name": "h100", "description": "the H100 boards",
            "hosts": [str(teams.hosts["gpu-03"].pk)],
            "grants-TOTAL_FORMS": "1", "grants-INITIAL_FORMS": "0",
            "grants-0-user": str(User.objects.get(username="root-admin").pk),
            "grants-0-role": "approver",
            "idp_mappings-TOTAL_FORMS": "1", "idp_mappings-INITIAL_FORMS": "0",
            "idp_mappings-0-idp_group": "ml-h100-ops", "idp_mappings-0-role": "operator",
        },
    )  # fmt: skip
    assert response.status_code == 302, response.content.decode()[:2000]
    group = HostGroup.objects.get(name="h100")
    created = AuditEvent.objects.get(action="hostgroup.created", target_id=str(group.pk))
    assert (created.actor, created.target_label) == ("root-admin", "h100")
    joined = AuditEvent.objects.get(action="hostgroup.hosts_changed", target_id=str(group.pk))
    assert (joined.actor, joined.host_label, joined.data["change"]) == (
        "root-admin",
        "gpu-03",
        "add",
    )
    mapped = AuditEvent.objects.get(action="grouprolemapping.created")
    assert mapped.data["after"]["idp_group"] == "ml-h100-ops"
    granted = AuditEvent.objects.filter(action="user.roles_changed").order_by("-seq").first()
    assert granted is not None and granted.data["grant"] == {
        "role": "approver", "host_group": "h100"
    }  # fmt: skip
    assert GroupRoleMapping.objects.get().host_group == group


def test_an_event_naming_several_hosts_shows_only_to_who_sees_them_all(client, teams, scoped):
    """A rollout's events name every host it reaches (record(hosts=...)): a person who does not
    see one of them does not see the event, in the history, its page or an export; a person
    who sees every one does."""
    team_a_only = [teams.hosts["gpu-02"].pk, teams.hosts["gpu-03"].pk]
    with audit_context_of("story-2"):
        inside = audit.record(action=AuditAction.WEBHOOK_TEST_SENT, hosts=team_a_only)
        across = audit.record(
            action=AuditAction.WEBHOOK_TEST_SENT, hosts=[*team_a_only, teams.hosts["gpu-01"].pk]
        )
    client.force_login(scoped("ann", "viewer", "team-a"))
    body = client.get(reverse("audit:history")).content.decode()
    assert f'id="event-{inside.seq}"' in body
    assert f'id="event-{across.seq}"' not in body
    assert client.get(reverse("audit:event", args=[across.seq])).status_code == 404
    exported = streamed(client.get(reverse("audit:export_jsonl"))).splitlines()
    seqs = {json.loads(line)["seq"] for line in exported}
    assert inside.seq in seqs and across.seq not in seqs
    client.force_login(scoped("pat", "viewer", "team-a", "viewer", "prod"))
    body = client.get(reverse("audit:history")).content.decode()
    assert f'id="event-{across.seq}"' in body
