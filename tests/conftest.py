"""Shared fixtures: personas for every role, and the simulated fleet (tests/fleet.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db.backends.signals import connection_created

from controlplane.accounts.roles import APPROVER, OPERATOR, VIEWER, ensure_role_groups

pytest_plugins = ["tests.fleet", "tests.workers"]

PASSWORD = "correct-horse-battery-staple"


def _allow_test_database_flush(sender: object, connection: object, **kwargs: object) -> None:
    """Tests that commit (real workers, concurrency) empty the database afterwards with
    TRUNCATE, which the audit table's trigger refuses unless the session opts in."""
    if getattr(connection, "vendor", "") == "postgresql":
        with connection.cursor() as cursor:  # type: ignore[attr-defined]
            cursor.execute("SET controlplane.audit_allow_truncate = 'on'")


connection_created.connect(_allow_test_database_flush, dispatch_uid="tests-allow-flush")


def _user(username: str, *roles: str, superuser: bool = False) -> User:
    groups = ensure_role_groups()
    if superuser:
        user = User.objects.create_superuser(username, f"{username}@example.test", PASSWORD)
    else:
        user = User.objects.create_user(username, f"{username}@example.test", PASSWORD)
    for role in roles:
        user.groups.add(groups[role])
    return user


@pytest.fixture
def viewer(db: None) -> User:
    return _user("vera", VIEWER)


@pytest.fixture
def operator(db: None) -> User:
    return _user("otto", OPERATOR)


@pytest.fixture
def approver(db: None) -> User:
    return _user("anna", APPROVER)


@pytest.fixture
def outsider(db: None) -> User:
    """Signed in, but holds no role."""
    return _user("oscar")


@pytest.fixture
def admin_user(db: None) -> User:
    return _user("root-admin", superuser=True)
