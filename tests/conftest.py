"""Shared fixtures: personas for every role, and the simulated fleet (tests/fleet.py)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db.backends.postgresql.base import DatabaseWrapper as PostgresWrapper
from django.db.backends.sqlite3.base import DatabaseWrapper as SQLiteWrapper

from controlplane.accounts.roles import APPROVER, OPERATOR, VIEWER, ensure_role_groups

pytest_plugins = ["tests.fleet", "tests.workers", "tests.oidc.provider", "tests.scope"]

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


# --- pytest-xdist (`make pytest` runs the suite on one worker per CPU) -------------------------

_XDIST_GROUP = re.compile(r"""xdist_group\(\s*(?:name\s*=\s*)?["']([^"']+)["']""")


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`, as xdist means it, on this pytest: tests one by one to whichever
    worker is free, except that a module marked `pytest.mark.xdist_group(name)` goes to one
    worker whole (its module-scoped fixture, which may be a minute of real work, then runs once).

    xdist itself groups by appending `@name` to the node id on the worker, which pytest 9 no
    longer lets a plugin change, so here the group is read from the module's source instead.
    Whole modules only: a group mark on one function groups its module, which is never wrong,
    only coarser."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    # Groups stay where collection put them, never moved to the front as xdist does by default:
    # pytest-django runs transactional tests (which flush the rows migrations made) after the
    # others, and each worker must keep that order.
    config.option.loadscopereorder = False

    root = config.rootpath

    @cache
    def module_group(module: str) -> str | None:
        try:
            found = _XDIST_GROUP.search((root / module).read_text(encoding="utf-8"))
        except OSError:
            return None
        return found.group(1) if found else None

    class ModuleGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if "@" in nodeid.rpartition("]")[2]:  # an xdist that could mark the node id
                return super()._split_scope(nodeid)
            group = module_group(nodeid.split("::", 1)[0])
            return f"group:{group}" if group else nodeid

    return ModuleGroupScheduling(config, log)
