"""Host groups and people whose roles hold on one of them, for the scope tests.

`teams`: gpu-01 in prod only, gpu-02 in prod and team-a, gpu-03 in team-a only, each serving
Kimi-K2.5 NVFP4 with a fresh snapshot. `scoped(name, role, group)`: a user holding `role` on
that host group only (a RoleGrant), as the admin grants it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import User

from controlplane.accounts.models import HostGroup, RoleGrant
from deployments.models import Deployment, ModelArtifact
from hosts.models import Host, StateSnapshot
from tests import factories as f
from tests.conftest import PASSWORD


@dataclass
class Teams:
    prod: HostGroup
    team_a: HostGroup
    hosts: dict[str, Host]
    deployments: dict[str, Deployment]
    snapshots: dict[str, StateSnapshot]
    catalog: dict[str, ModelArtifact]


@pytest.fixture
def teams(db: None) -> Teams:
    catalog = f.make_catalog()
    prod = HostGroup.objects.create(name="prod")
    team_a = HostGroup.objects.create(name="team-a")
    hosts = {name: f.make_host(name, port=1) for name in ("gpu-01", "gpu-02", "gpu-03")}
    prod.hosts.add(hosts["gpu-01"], hosts["gpu-02"])
    team_a.hosts.add(hosts["gpu-02"], hosts["gpu-03"])
    return Teams(
        prod=prod,
        team_a=team_a,
        hosts=hosts,
        deployments={n: f.make_deployment(h, catalog["NVFP4"]) for n, h in hosts.items()},
        snapshots={n: f.make_snapshot(h) for n, h in hosts.items()},
        catalog=catalog,
    )


Scoped = Callable[..., User]


@pytest.fixture
def scoped(db: None) -> Scoped:
    """`scoped("tess", "operator", "team-a", "approver", "prod")`: a user holding each role on
    the host group after it, and nothing anywhere."""

    def make(username: str, *grants: str) -> User:
        user = User.objects.create_user(username, f"{username}@example.test", PASSWORD)
        for role, group in zip(grants[::2], grants[1::2], strict=True):
            RoleGrant.objects.create(
                user=user, role=role, host_group=HostGroup.objects.get(name=group)
            )
        return user

    return make
