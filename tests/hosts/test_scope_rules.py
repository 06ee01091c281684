"""The host rules with host groups, in the services: a host outside a person's scope is not
found, one inside it without the role is forbidden naming the role and the host; probing and
reading a journal check the host, not only the role anywhere."""

from __future__ import annotations

import pytest

from controlplane.audit.models import AuditEvent
from hosts import services
from hosts.models import StateSnapshot
from hosts.scope import hosts_group_ids_prefetch, rows_visible
from tests.factories import UNIT

pytestmark = pytest.mark.django_db


def test_a_host_outside_the_scope_is_not_found_and_one_inside_without_the_role_forbidden(
    teams, scoped
):
    tess = scoped("tess", "operator", "team-a", "viewer", "prod")
    services.host_role_require(
        user=tess, host=teams.hosts["gpu-03"], roles=["operator"], doing="Probing"
    )
    with pytest.raises(services.HostRefused) as refused:
        services.host_role_require(
            user=tess, host=teams.hosts["gpu-01"], roles=["operator"], doing="Probing"
        )
    assert refused.value.code == "forbidden"
    assert refused.value.message == "Probing needs the operator role on gpu-01."
    only_a = scoped("ann", "operator", "team-a")
    with pytest.raises(services.HostRefused) as hidden:
        services.host_role_require(
            user=only_a, host=teams.hosts["gpu-01"], roles=["operator"], doing="Probing"
        )
    assert (hidden.value.code, hidden.value.message) == ("not_found", "No such host.")


def test_probing_needs_the_role_on_the_host(teams, scoped, private_queue):
    tess = scoped("tess", "operator", "team-a", "viewer", "prod")
    assert services.user_may_probe(tess)  # the first gate: somewhere
    assert services.user_may_probe(tess, teams.hosts["gpu-02"])
    assert not services.user_may_probe(tess, teams.hosts["gpu-01"])
    services.probe_enqueue(host=teams.hosts["gpu-03"], user=tess)
    with pytest.raises(services.HostRefused) as refused:
        services.probe_enqueue(host=teams.hosts["gpu-01"], user=tess)
    assert refused.value.code == "forbidden"
    with pytest.raises(services.HostRefused) as refused:
        services.host_probe_now(
            host=teams.hosts["gpu-01"], user=scoped("ann", "operator", "team-a")
        )
    assert refused.value.code == "not_found"


def test_reading_a_journal_needs_a_host_in_the_scope(teams, scoped):
    ann = scoped("ann", "viewer", "team-a")
    with pytest.raises(services.HostRefused) as refused:
        services.host_journal(host=teams.hosts["gpu-01"], unit=UNIT, user=ann)
    assert refused.value.code == "not_found"
    assert not AuditEvent.objects.filter(action="host.journal_read").exists()


def test_rows_of_hosts_outside_the_scope_are_left_out_in_one_query(
    teams, scoped, django_assert_num_queries
):
    ann = scoped("ann", "viewer", "team-a")
    rows_visible(ann, StateSnapshot.objects.all()).count()  # reads ann's grants once
    with django_assert_num_queries(1):
        seen = set(
            rows_visible(ann, StateSnapshot.objects.all()).values_list("host__name", flat=True)
        )
    assert seen == {"gpu-02", "gpu-03"}


def test_many_hosts_group_ids_are_read_in_one_query(teams, django_assert_num_queries):
    hosts = list(teams.hosts.values())
    with django_assert_num_queries(1):
        hosts_group_ids_prefetch(hosts)
    assert [h._group_ids for h in hosts] == [
        frozenset({teams.prod.pk}),
        frozenset({teams.prod.pk, teams.team_a.pk}),
        frozenset({teams.team_a.pk}),
    ]


def test_hosts_join_and_leave_groups(teams):
    group = services.host_group_join(hosts=[teams.hosts["gpu-03"]], name="h100")
    assert list(group.hosts.values_list("name", flat=True)) == ["gpu-03"]
    services.host_group_join(hosts=[teams.hosts["gpu-03"]], name="h100")  # twice: once
    assert group.hosts.count() == 1
    services.host_group_leave(hosts=[teams.hosts["gpu-03"]], name="h100")
    assert group.hosts.count() == 0
    with pytest.raises(services.HostRefused, match="no host group named 'nope'"):
        services.host_group_leave(hosts=[teams.hosts["gpu-03"]], name="nope")
    with pytest.raises(services.HostRefused, match="no host group named 'nope'"):
        services.host_group_join(hosts=[teams.hosts["gpu-03"]], name="nope", create=False)
    with pytest.raises(services.HostRefused) as bad:
        services.host_group_join(hosts=[teams.hosts["gpu-03"]], name="Not A Name")
    assert bad.value.code == "invalid" and "lowercase" in bad.value.message
