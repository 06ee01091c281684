"""GPU samples keyed by (snapshot, GPU), without their id and taken_at; snapshots without the
host_id index that `snapshot_host_newest` already covers.

Eight GPU samples a probe each paid an 8-byte id, its primary key index entry and an 8-byte
time that the minute column already holds (bench/README.md, "Storage per host per day").

Online on PostgreSQL: the new key's index is built CONCURRENTLY first, then one short
transaction swaps it in (dropping a column is a catalogue change: old rows keep their bytes
until they are rewritten or removed by retention). The swap waits at most LOCK_TIMEOUT for
the table's lock behind running probe transactions; if it gives up, `migrate` again.

The `taken_at` column stays on PostgreSQL, nullable and left NULL, for the previous version's
workers: they name it when they write samples, and may still be probing while `migrate` runs.
A NULL costs a new row nothing, since the dropped id is a NULL in it already. A later release
drops the column. SQLite, the demo's and the fast tests' database, rebuilds the table without
it. Backwards, each sample gets a new id and its snapshot's time again.
"""

import django.db.models.deletion
from django.db import migrations, models, transaction

LOCK_TIMEOUT = "10s"
SNAPSHOT_HOST_INDEX = "hosts_statesnapshot_host_id_cc60a1b7"  # Django's name for the FK index
READINGS = (
    "host_id", "snapshot_id", "minute", "gpu", "memory_used_mib", "memory_total_mib",
    "power_draw_w", "utilization_pct", "temperature_c",
)  # fmt: skip


def _postgresql_gpusample_key(connection):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = 'hosts_gpusample'"
            " AND column_name = 'id'"
        )
        if cursor.fetchone() is None:
            return  # swapped by an earlier run that stopped before it was recorded
        # an index left INVALID by a stopped build cannot become a key
        cursor.execute("DROP INDEX CONCURRENTLY IF EXISTS gpusample_key")
        cursor.execute(
            "CREATE UNIQUE INDEX CONCURRENTLY gpusample_key ON hosts_gpusample (snapshot_id, gpu)"
        )
        with transaction.atomic(using=connection.alias):
            cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            cursor.execute("ALTER TABLE hosts_gpusample DROP CONSTRAINT gpusample_snapshot_gpu")
            cursor.execute("ALTER TABLE hosts_gpusample DROP COLUMN id")  # and its primary key
            cursor.execute(
                "ALTER TABLE hosts_gpusample ADD CONSTRAINT hosts_gpusample_pkey"
                " PRIMARY KEY USING INDEX gpusample_key"
            )
            cursor.execute("ALTER TABLE hosts_gpusample ALTER COLUMN taken_at DROP NOT NULL")


def _sqlite_gpusample_rebuild(apps, schema_editor):
    columns = ", ".join(READINGS)
    schema_editor.execute("DROP INDEX IF EXISTS gpusample_host_chart")
    schema_editor.execute("ALTER TABLE hosts_gpusample RENAME TO hosts_gpusample_before_key")
    schema_editor.create_model(apps.get_model("hosts", "GpuSample"))
    schema_editor.execute(
        f"INSERT INTO hosts_gpusample ({columns}) SELECT {columns} FROM hosts_gpusample_before_key"
    )
    schema_editor.execute("DROP TABLE hosts_gpusample_before_key")


def _sqlite_gpusample_rebuild_back(apps, schema_editor):
    """Run with the state before this migration: the table as it was, ids new, times again."""
    if schema_editor.connection.vendor == "postgresql":
        return
    columns = ", ".join(READINGS)
    selected = ", ".join(f"g.{column}" for column in READINGS)
    schema_editor.execute("DROP INDEX IF EXISTS gpusample_host_chart")
    schema_editor.execute("ALTER TABLE hosts_gpusample RENAME TO hosts_gpusample_keyed")
    schema_editor.create_model(apps.get_model("hosts", "GpuSample"))
    schema_editor.execute(
        f"INSERT INTO hosts_gpusample ({columns}, taken_at)"
        f" SELECT {selected}, s.taken_at"
        " FROM hosts_gpusample_keyed g JOIN hosts_statesnapshot s ON s.id = g.snapshot_id"
    )
    schema_editor.execute("DROP TABLE hosts_gpusample_keyed")
    schema_editor.execute(f"CREATE INDEX {SNAPSHOT_HOST_INDEX} ON hosts_statesnapshot (host_id)")


def backwards(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return  # _sqlite_gpusample_rebuild_back, once the state is the old one
    with connection.cursor() as cursor, transaction.atomic(using=connection.alias):
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        cursor.execute("ALTER TABLE hosts_gpusample DROP CONSTRAINT hosts_gpusample_pkey")
        cursor.execute(
            "UPDATE hosts_gpusample g SET taken_at = s.taken_at"
            " FROM hosts_statesnapshot s WHERE s.id = g.snapshot_id AND g.taken_at IS NULL"
        )
        cursor.execute("ALTER TABLE hosts_gpusample ALTER COLUMN taken_at SET NOT NULL")
        cursor.execute(
            "ALTER TABLE hosts_gpusample ADD COLUMN id bigint"
            " GENERATED BY DEFAULT AS IDENTITY CONSTRAINT hosts_gpusample_pkey PRIMARY KEY"
        )
        cursor.execute(
            "ALTER TABLE hosts_gpusample"
            " ADD CONSTRAINT gpusample_snapshot_gpu UNIQUE (snapshot_id, gpu)"
        )
        cursor.execute(f"CREATE INDEX {SNAPSHOT_HOST_INDEX} ON hosts_statesnapshot (host_id)")


def forwards(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor == "postgresql":
        _postgresql_gpusample_key(connection)
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {SNAPSHOT_HOST_INDEX}")
    else:
        _sqlite_gpusample_rebuild(apps, schema_editor)
        schema_editor.execute(f"DROP INDEX IF EXISTS {SNAPSHOT_HOST_INDEX}")


class Migration(migrations.Migration):
    atomic = False  # CREATE/DROP INDEX CONCURRENTLY; the key swap is its own transaction

    dependencies = [
        ("hosts", "0012_verdict_order"),
    ]

    operations = [
        # backwards only, and last: by then the state is the one before this migration
        migrations.RunPython(
            migrations.RunPython.noop, _sqlite_gpusample_rebuild_back, elidable=False
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveConstraint(model_name="gpusample", name="gpusample_snapshot_gpu"),
                migrations.RemoveField(model_name="gpusample", name="id"),
                migrations.RemoveField(model_name="gpusample", name="taken_at"),
                migrations.AddField(
                    model_name="gpusample",
                    name="pk",
                    field=models.CompositePrimaryKey(
                        "snapshot",
                        "gpu",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),  # fmt: skip
                ),
                migrations.AlterField(
                    model_name="statesnapshot",
                    name="host",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="snapshots",
                        to="hosts.host",
                    ),
                ),
            ],
        ),
        # after the state change: SQLite's rebuild creates the table as the model now is
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
