"""Shared fixtures: personas for every role, and the simulated fleet (tests/fleet.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db.backends.postgresql.base import DatabaseWrapper as PostgresWrapper
from django.db.backends.sqlite3.base import DatabaseWrapper as SQLiteWrapper

from controlplane.accounts.roles import APPROVER, OPERATOR, VIEWER, ensure_role_groups

pytest_plugins = ["tests.fleet", "tests.workers"]

PASSWORD = "correct-horse-battery-staple"

# Personas are created in nearly every test; a slow hasher is what production wants, not tests.
settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _flush_with_audit_triggers_lifted(ops: Any, sql_list: list[str]) -> None:
    """Transactional tests (real workers, concurrency) empty the test database afterwards. The
    audit table refuses that by design, so the flush lifts its triggers in the same transaction,
    with the privileges only the test database's owner has."""
    vendor = ops.connection.vendor
    if vendor == "postgresql":
        sql_list = [
            "ALTER TABLE audit_auditevent DISABLE TRIGGER USER",
            *sql_list,
            "ALTER TABLE audit_auditevent ENABLE TRIGGER USER",
        ]
    elif vendor == "sqlite":
        triggers = _sqlite_audit_triggers(ops.connection)
        sql_list = [*(f"DROP TRIGGER {name}" for name, _ in triggers), *sql_list]
        sql_list += [sql for _, sql in triggers]
    _original_flush[vendor](ops, sql_list)


def _sqlite_audit_triggers(connection: Any) -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
            "AND tbl_name = 'audit_auditevent'"
        )
        return list(cursor.fetchall())


_original_flush: dict[str, Any] = {}
for _vendor, _ops in (
    ("postgresql", PostgresWrapper.ops_class),
    ("sqlite", SQLiteWrapper.ops_class),
):
    _original_flush[_vendor] = _ops.execute_sql_flush
    _ops.execute_sql_flush = _flush_with_audit_triggers_lifted  # type: ignore[method-assign]


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests last: they are the slowest, and the quick failures should come first."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
