"""Where a role holds: everywhere (the role's Django group), on a host group (a RoleGrant), or
as the identity provider's groups map it (GroupRoleMapping, Identity's groups)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from controlplane.accounts.context_processors import roles_shown
from controlplane.accounts.models import (
    GroupRoleMapping,
    HostGroup,
    Identity,
    IdentityGroup,
    RoleGrant,
)
from controlplane.accounts.roles import (
    APPROVER,
    OPERATOR,
    VIEWER,
    has_role,
    has_role_on,
    scope_forget,
    user_scope,
)
from hosts.scope import hosts_visible, user_has_role_on_host, user_sees_host
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet() -> dict[str, object]:
    prod, team_a = HostGroup.objects.create(name="prod"), HostGroup.objects.create(name="team-a")
    hosts = {name: f.make_host(name, port=1) for name in ("gpu-01", "gpu-02", "gpu-03")}
    prod.hosts.add(hosts["gpu-01"], hosts["gpu-02"])
    team_a.hosts.add(hosts["gpu-02"], hosts["gpu-03"])
    return {"prod": prod, "team-a": team_a, **hosts}


def test_a_role_granted_on_a_group_holds_on_its_hosts_only(fleet) -> None:
    user = User.objects.create_user("tam")
    RoleGrant.objects.create(user=user, role=OPERATOR, host_group=fleet["team-a"])
    assert user_has_role_on_host(user, OPERATOR, fleet["gpu-03"])
    assert user_has_role_on_host(user, OPERATOR, fleet["gpu-02"])
    assert not user_has_role_on_host(user, OPERATOR, fleet["gpu-01"])
    assert not user_sees_host(user, fleet["gpu-01"])
    assert sorted(h.name for h in hosts_visible(user)) == ["gpu-02", "gpu-03"]
    # a role on a group makes its holder a viewer there, and an operator "somewhere"
    assert user_has_role_on_host(user, VIEWER, fleet["gpu-03"])
    assert has_role(user, OPERATOR) and not has_role(user, APPROVER)


def test_a_global_role_sees_every_host(fleet, viewer) -> None:
    assert user_scope(viewer).sees_every_host
    assert hosts_visible(viewer).count() == 3
    assert not user_has_role_on_host(viewer, OPERATOR, fleet["gpu-01"])


def test_the_identity_providers_groups_map_to_roles(fleet) -> None:
    user = User.objects.create_user("ida")
    identity = Identity.objects.create(user=user, issuer="https://idp.test", subject="s-1")
    GroupRoleMapping.objects.create(idp_group="ml-prod-approvers", role=APPROVER,
                                    host_group=fleet["prod"])  # fmt: skip
    GroupRoleMapping.objects.create(idp_group="ml-readers", role=VIEWER)
    assert not hosts_visible(user).exists()
    IdentityGroup.objects.create(identity=identity, name="ml-prod-approvers")
    scope_forget(user)
    assert has_role_on(user, APPROVER, [fleet["prod"].pk])
    assert not has_role_on(user, APPROVER, [fleet["team-a"].pk])
    assert sorted(h.name for h in hosts_visible(user)) == ["gpu-01", "gpu-02"]
    IdentityGroup.objects.create(identity=identity, name="ml-readers")
    scope_forget(user)
    assert hosts_visible(user).count() == 3
    # a group the provider no longer sends takes its role with it
    IdentityGroup.objects.filter(identity=identity, name="ml-prod-approvers").delete()
    scope_forget(user)
    assert not has_role(user, APPROVER)


def test_no_role_sees_nothing(fleet, outsider) -> None:
    assert not hosts_visible(outsider).exists()
    assert user_scope(outsider).roles_anywhere() == frozenset()


def test_the_header_says_where_each_role_holds(fleet, viewer) -> None:
    RoleGrant.objects.create(user=viewer, role=OPERATOR, host_group=fleet["team-a"])
    RoleGrant.objects.create(user=viewer, role=APPROVER, host_group=fleet["prod"])
    RoleGrant.objects.create(user=viewer, role=APPROVER, host_group=fleet["team-a"])
    scope_forget(viewer)
    assert roles_shown(viewer) == ["viewer", "approver on prod, team-a", "operator on team-a"]
    reader = User.objects.create_user("rita")
    RoleGrant.objects.create(user=reader, role=VIEWER, host_group=fleet["prod"])
    assert roles_shown(reader) == ["viewer on prod"]
