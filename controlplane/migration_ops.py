"""Index operations for tables that grow with the fleet (snapshots, GPU samples, audit events).

A plain CREATE INDEX holds a SHARE lock on its table while it builds: on a live database of
fleet size that stops every probe's insert and every audit append for as long as the build
takes. These build and drop the index CONCURRENTLY on PostgreSQL, and plainly elsewhere (SQLite,
the demo's and the fast tests' database, has one writer and nothing to lock out).

A migration that uses them sets `atomic = False`: PostgreSQL refuses CONCURRENTLY inside a
transaction. If a concurrent build fails (a unique violation, a cancelled statement) PostgreSQL
leaves the index INVALID; drop it (`DROP INDEX CONCURRENTLY name`) and run `migrate` again.
tests/test_migrations_concurrent.py keeps every index on those tables built this way.
"""

from __future__ import annotations

from typing import Any

from django.contrib.postgres import operations as postgres_operations
from django.db import migrations

# The tables a migration must not lock while it builds an index on them (db_table names).
FLEET_SIZE_TABLES = frozenset(
    {
        "hosts_statesnapshot",
        "hosts_gpusample",
        "hosts_snapshotblob",
        "audit_auditevent",
        "audit_auditeventhost",
    }
)


def _postgresql(schema_editor: Any) -> bool:
    return schema_editor.connection.vendor == "postgresql"


class AddIndexConcurrently(postgres_operations.AddIndexConcurrently):
    """CREATE INDEX CONCURRENTLY on PostgreSQL, CREATE INDEX elsewhere."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if _postgresql(schema_editor):
            super().database_forwards(app_label, schema_editor, from_state, to_state)
        else:
            migrations.AddIndex.database_forwards(
                self, app_label, schema_editor, from_state, to_state
            )

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if _postgresql(schema_editor):
            super().database_backwards(app_label, schema_editor, from_state, to_state)
        else:
            migrations.AddIndex.database_backwards(
                self, app_label, schema_editor, from_state, to_state
            )


class RemoveIndexConcurrently(postgres_operations.RemoveIndexConcurrently):
    """DROP INDEX CONCURRENTLY on PostgreSQL, DROP INDEX elsewhere."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if _postgresql(schema_editor):
            super().database_forwards(app_label, schema_editor, from_state, to_state)
        else:
            migrations.RemoveIndex.database_forwards(
                self, app_label, schema_editor, from_state, to_state
            )

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if _postgresql(schema_editor):
            super().database_backwards(app_label, schema_editor, from_state, to_state)
        else:
            migrations.RemoveIndex.database_backwards(
                self, app_label, schema_editor, from_state, to_state
            )
