"""python manage.py demo_users: the demo's four users, one per role (idempotent)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand
from django.db import transaction

from controlplane.accounts.roles import APPROVER, OPERATOR, VIEWER, ensure_role_groups
from controlplane.audit import context as audit_context
from controlplane.audit.services import SYSTEM_CLI

DEMO_USERS = [
    # (user name, password, roles, superuser)
    ("admin", "admin-demo-pass", [], True),
    ("olivia", "operator-demo-pass", [OPERATOR], False),
    ("arthur", "approver-demo-pass", [APPROVER], False),
    ("vick", "viewer-demo-pass", [VIEWER], False),
]


class Command(BaseCommand):
    help = "Create the demo users (admin, operator, approver, viewer) if they do not exist."

    def handle(self, *args: Any, **options: Any) -> None:
        groups = ensure_role_groups()
        with audit_context.acting(SYSTEM_CLI), transaction.atomic():
            for name, password, roles, superuser in DEMO_USERS:
                if User.objects.filter(username=name).exists():
                    continue
                user = User(username=name, is_superuser=superuser, is_staff=superuser)
                user.set_password(password)
                user.save()
                user.groups.set([groups[r] for r in roles])
        for name, password, roles, superuser in DEMO_USERS:
            role = "admin" if superuser else ", ".join(roles)
            self.stdout.write(f"  {name:<8} {password:<20} {role}")
