"""Store event data as canonical JSON text and keep verification results.

- `data` becomes text holding exactly the bytes the hash covers (see fields.py). Existing rows
  are rewritten to that canonical text once, with the append-only triggers held off for this
  migration only. The hash was always computed over the canonical form, so every stored hash
  stays valid; `verify_audit` proves it afterwards.
- On SQLite, altering the column rebuilds the table, which drops its triggers: they are
  installed again here.
"""

import json

from django.db import migrations, models

import controlplane.audit.fields

SQLITE_TRIGGERS = [
    """CREATE TRIGGER audit_event_no_update BEFORE UPDATE ON audit_auditevent
       BEGIN SELECT RAISE(ABORT, 'audit_auditevent is append-only: UPDATE refused'); END;""",
    """CREATE TRIGGER audit_event_no_delete BEFORE DELETE ON audit_auditevent
       BEGIN SELECT RAISE(ABORT, 'audit_auditevent is append-only: DELETE refused'); END;""",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS audit_event_no_update;",
    "DROP TRIGGER IF EXISTS audit_event_no_delete;",
]


def _canonical(text):
    return json.dumps(
        json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )


def _rewrite_data(cursor):
    cursor.execute("SELECT seq, data FROM audit_auditevent ORDER BY seq")
    rows = [(seq, text) for seq, text in cursor.fetchall() if text is not None]
    for seq, text in rows:
        canonical = _canonical(text)
        if canonical != text:
            cursor.execute("UPDATE audit_auditevent SET data = %s WHERE seq = %s", [canonical, seq])


def forwards(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE audit_auditevent DISABLE TRIGGER USER")
            _rewrite_data(cursor)
            cursor.execute("ALTER TABLE audit_auditevent ENABLE TRIGGER USER")
        elif connection.vendor == "sqlite":
            for statement in SQLITE_DROP:
                cursor.execute(statement)
            _rewrite_data(cursor)
            for statement in SQLITE_TRIGGERS:
                cursor.execute(statement)


def reinstall_sqlite_triggers(apps, schema_editor):
    # Going back rebuilds the SQLite table again.
    if schema_editor.connection.vendor == "sqlite":
        for statement in SQLITE_DROP + SQLITE_TRIGGERS:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("audit", "0002_chain_head_and_append_only_triggers")]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, reinstall_sqlite_triggers),
        migrations.AlterField(
            model_name="auditevent",
            name="data",
            field=controlplane.audit.fields.CanonicalJSONField(blank=True, default=dict),
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop),
        migrations.CreateModel(
            name="AuditVerification",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("started_at", models.DateTimeField()),
                ("duration_ms", models.PositiveIntegerField()),
                ("trigger", models.CharField(max_length=20)),
                ("ok", models.BooleanField()),
                ("events", models.BigIntegerField()),
                ("head_seq", models.BigIntegerField()),
                ("head_hash", models.CharField(blank=True, max_length=64)),
                ("checkpoints", models.PositiveIntegerField()),
                ("broken_seq", models.BigIntegerField(blank=True, null=True)),
                ("problem", models.CharField(blank=True, max_length=40)),
                ("reason", models.TextField(blank=True)),
            ],
            options={
                "ordering": ["-started_at", "-id"],
                "indexes": [
                    models.Index(fields=["-started_at"], name="audit_verification_latest")
                ],
            },
        ),
    ]
