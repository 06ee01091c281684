# The fleet page in verdict order from an index: each host's verdict severity copied onto its
# row by a trigger on the verdict table, so every writer of a verdict (the verdict service, the
# admin, a script) keeps it, and the sort, the verdict filter and the counts read one table.
# The trigger is created before the copy of the existing verdicts, so a verdict written while
# this runs is not missed. With it, an index of the hosts in maintenance (counted on the same
# page). The indexes are built CONCURRENTLY on PostgreSQL (`atomic = False`).

from django.db import migrations, models, transaction

from controlplane.migration_ops import AddIndexConcurrently

POSTGRESQL_FORWARDS = """
CREATE OR REPLACE FUNCTION hosts_verdict_severity_copy() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE hosts_host SET verdict_severity = NULL
        WHERE id = OLD.host_id AND verdict_severity IS NOT NULL;
        RETURN OLD;
    END IF;
    UPDATE hosts_host SET verdict_severity = NEW.severity
    WHERE id = NEW.host_id AND verdict_severity IS DISTINCT FROM NEW.severity;
    RETURN NEW;
END
$$ LANGUAGE plpgsql;
CREATE TRIGGER hosts_verdict_severity
AFTER INSERT OR UPDATE OF severity OR DELETE ON hosts_hosthealth
FOR EACH ROW EXECUTE FUNCTION hosts_verdict_severity_copy();
UPDATE hosts_host SET verdict_severity = health.severity
FROM hosts_hosthealth AS health
WHERE health.host_id = hosts_host.id
  AND hosts_host.verdict_severity IS DISTINCT FROM health.severity;
"""
POSTGRESQL_BACKWARDS = """
DROP TRIGGER IF EXISTS hosts_verdict_severity ON hosts_hosthealth;
DROP FUNCTION IF EXISTS hosts_verdict_severity_copy();
"""
SQLITE_FORWARDS = [
    """CREATE TRIGGER hosts_verdict_severity_insert AFTER INSERT ON hosts_hosthealth
    BEGIN UPDATE hosts_host SET verdict_severity = NEW.severity WHERE id = NEW.host_id; END""",
    """CREATE TRIGGER hosts_verdict_severity_update AFTER UPDATE OF severity ON hosts_hosthealth
    BEGIN UPDATE hosts_host SET verdict_severity = NEW.severity WHERE id = NEW.host_id; END""",
    """CREATE TRIGGER hosts_verdict_severity_delete AFTER DELETE ON hosts_hosthealth
    BEGIN UPDATE hosts_host SET verdict_severity = NULL WHERE id = OLD.host_id; END""",
    """UPDATE hosts_host SET verdict_severity =
    (SELECT severity FROM hosts_hosthealth WHERE host_id = hosts_host.id)""",
]
SQLITE_BACKWARDS = [
    "DROP TRIGGER IF EXISTS hosts_verdict_severity_insert",
    "DROP TRIGGER IF EXISTS hosts_verdict_severity_update",
    "DROP TRIGGER IF EXISTS hosts_verdict_severity_delete",
]


def _run(schema_editor, postgresql, sqlite):
    with transaction.atomic(using=schema_editor.connection.alias):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(postgresql)
        else:
            for statement in sqlite:
                schema_editor.execute(statement)


def copy_verdicts(apps, schema_editor):
    _run(schema_editor, POSTGRESQL_FORWARDS, SQLITE_FORWARDS)


def stop_copying(apps, schema_editor):
    _run(schema_editor, POSTGRESQL_BACKWARDS, SQLITE_BACKWARDS)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("hosts", "0011_section_dictionaries"),
    ]

    operations = [
        migrations.AddField(
            model_name="host",
            name="verdict_severity",
            field=models.PositiveSmallIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(copy_verdicts, stop_copying),
        AddIndexConcurrently(
            model_name="host",
            index=models.Index(fields=["-verdict_severity", "name"], name="host_verdict_order"),
        ),
        AddIndexConcurrently(
            model_name="host",
            index=models.Index(
                condition=models.Q(maintenance_until__isnull=False),
                fields=["maintenance_until"],
                name="host_maintenance_until",
            ),
        ),
    ]
