"""python manage.py demo_users: the demo's users, one per role and one whose role holds on one
host group only, and the demo's host groups (idempotent: run again once the simulated fleet is
registered, it puts its hosts into their groups)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand
from django.db import transaction

from controlplane.accounts.models import HostGroup, RoleGrant
from controlplane.accounts.roles import APPROVER, OPERATOR, VIEWER, ensure_role_groups
from controlplane.audit import context as audit_context
from controlplane.audit.services import SYSTEM_CLI
from hosts import services as host_services
from hosts.models import Host

DEMO_USERS = [
    # (user name, password, roles everywhere, superuser, {host group: roles there})
    ("admin", "admin-demo-pass", [], True, {}),
    ("olivia", "operator-demo-pass", [OPERATOR], False, {}),
    ("arthur", "approver-demo-pass", [APPROVER], False, {}),
    ("vick", "viewer-demo-pass", [VIEWER], False, {}),
    ("tess", "team-a-demo-pass", [], False, {"team-a": [OPERATOR]}),
]
# The simulated fleet's hosts by group; a host may be in several (gpu-02 is in both).
DEMO_HOST_GROUPS = {
    "prod": ("Production inference: what customers call.", ["gpu-01", "gpu-02"]),
    "team-a": ("Team A's hosts.", ["gpu-02", "gpu-03", "gpu-04"]),
}


class Command(BaseCommand):
    help = (
        "Create the demo users (admin, operator, approver, viewer, and an operator of team-a "
        "only) and the demo's host groups if they do not exist, and put the demo's hosts in them."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        groups = ensure_role_groups()
        with audit_context.acting(SYSTEM_CLI), transaction.atomic():
            host_groups = self._host_groups()
            for name, password, roles, superuser, scoped in DEMO_USERS:
                if User.objects.filter(username=name).exists():
                    continue
                user = User(username=name, is_superuser=superuser, is_staff=superuser)
                user.set_password(password)
                user.save()
                user.groups.set([groups[r] for r in roles])
                for group, granted in scoped.items():
                    for role in granted:
                        RoleGrant.objects.create(
                            user=user, role=role, host_group=host_groups[group]
                        )
        for name, password, roles, superuser, scoped in DEMO_USERS:
            role = "admin" if superuser else ", ".join(roles)
            role += ", ".join(f"{'/'.join(r)} of {g} only" for g, r in scoped.items())
            self.stdout.write(f"  {name:<8} {password:<20} {role}")

    def _host_groups(self) -> dict[str, HostGroup]:
        """The demo's groups, with whichever of their hosts are registered by now."""
        made = {}
        for name, (description, members) in DEMO_HOST_GROUPS.items():
            hosts = list(Host.objects.filter(name__in=members))
            made[name] = host_services.host_group_join(
                hosts=hosts, name=name, description=description
            )
        return made
