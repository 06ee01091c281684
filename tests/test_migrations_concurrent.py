"""Upgrading a live fleet: no migration locks a fleet-size table while it builds an index.

A plain CREATE INDEX holds a SHARE lock for the whole build, which on a database of fleet size
stops probes and audit appends (bench/migrations_online.py measures it). Every index operation
on those tables goes through controlplane.migration_ops, in a non-atomic migration.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection, migrations
from django.db.migrations.loader import MigrationLoader

from controlplane.migration_ops import (
    FLEET_SIZE_TABLES,
    AddIndexConcurrently,
    RemoveIndexConcurrently,
)

# (app, migration): why it may build an index on a fleet-size table under a lock.
LOCKING_ALLOWED = {
    # It rewrites every snapshot row (raw output into blobs) and drops a column in one
    # transaction, so the table is locked for the whole conversion whatever the index does; a
    # conversion that could stop half-way would be worse than the lock.
    ("hosts", "0004_blobs_retention_audit_on_change"),
}

INDEX_OPERATIONS = (migrations.AddIndex, migrations.RemoveIndex, migrations.AddConstraint)
CONCURRENT = (AddIndexConcurrently, RemoveIndexConcurrently)
OUR_APPS = {"hosts", "audit", "deployments", "accounts", "notifications", "monitoring"}


def _loader() -> MigrationLoader:
    return MigrationLoader(None, ignore_no_migrations=True)


def _index_operations_on_fleet_tables(loader: MigrationLoader):
    for key, migration in sorted(loader.disk_migrations.items()):
        if key[0] not in OUR_APPS:
            continue
        created = {
            op.name.lower() for op in migration.operations if isinstance(op, migrations.CreateModel)
        }
        state = loader.project_state(key, at_end=False)
        for op in migration.operations:
            if not isinstance(op, INDEX_OPERATIONS) or op.model_name.lower() in created:
                continue  # a table made by this migration is empty while its indexes build
            table = state.apps.get_model(key[0], op.model_name)._meta.db_table
            if table in FLEET_SIZE_TABLES:
                yield key, migration, op, table


def test_every_index_on_a_fleet_size_table_is_built_concurrently():
    found = list(_index_operations_on_fleet_tables(_loader()))
    assert found, "the walk must see the snapshot and audit indexes"
    locking = [
        f"{app}.{name}: {type(op).__name__} on {table}"
        for (app, name), _migration, op, table in found
        if not isinstance(op, CONCURRENT) and (app, name) not in LOCKING_ALLOWED
    ]
    assert not locking, "build these with controlplane.migration_ops:\n" + "\n".join(locking)
    in_transaction = sorted(
        f"{app}.{name}"
        for (app, name), migration, op, _table in found
        if isinstance(op, CONCURRENT) and migration.atomic
    )
    assert not in_transaction, f"set atomic = False on {in_transaction}"


def test_the_walk_sees_a_locking_index_as_one():
    """The rule above can fail: a plain AddIndex on the snapshot table is reported."""
    loader = _loader()
    migration = loader.disk_migrations[("hosts", "0006_snapshot_newest_index_with_id")]
    original = migration.operations
    try:
        migration.operations = [
            migrations.AddIndex(model_name=op.model_name, index=op.index)
            if isinstance(op, AddIndexConcurrently)
            else op
            for op in original
        ]
        found = [
            (key, op)
            for key, _m, op, _t in _index_operations_on_fleet_tables(loader)
            if key == ("hosts", "0006_snapshot_newest_index_with_id")
        ]
    finally:
        migration.operations = original
    assert any(type(op) is migrations.AddIndex for _key, op in found)


@pytest.mark.django_db(transaction=True)  # PostgreSQL refuses CONCURRENTLY in a transaction
def test_the_sql_builds_concurrently_on_postgresql_and_plainly_elsewhere():
    out = io.StringIO()
    call_command("sqlmigrate", "audit", "0006_host_label_index", stdout=out)
    sql = out.getvalue()
    assert "audit_host_label_seq" in sql
    if connection.vendor == "postgresql":
        assert "CREATE INDEX CONCURRENTLY" in sql
    else:
        assert "CREATE INDEX" in sql and "CONCURRENTLY" not in sql


@pytest.mark.django_db
def test_models_and_migrations_agree():
    out = io.StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()
