# Compressed probe sections (hosts.packing): the dictionaries, where each blob and snapshot keeps
# its compressed sections, and the indexes retention asks before removing a dictionary. Written by
# hand so that it does not hold a fleet-size table locked:
# - the new columns are NULL (no rewrite) and old rows stay as they are: a blob without `packed`
#   and a snapshot without `raw_packed` read back in the old layout, so nothing is converted;
# - on PostgreSQL the foreign keys are added NOT VALID and validated afterwards (a scan that
#   does not block writes), and the indexes are built CONCURRENTLY, so `atomic = False`; SQLite
#   (the demo, some tests) takes the plain operations, being one writer at a time anyway.

import django.db.models.deletion
from django.db import migrations, models

from controlplane.migration_ops import AddIndexConcurrently


def dictionary_field():
    return models.ForeignKey(
        blank=True,
        db_index=False,
        null=True,
        on_delete=django.db.models.deletion.PROTECT,
        related_name="+",
        to="hosts.sectiondictionary",
    )


class AddDictionaryKey(migrations.AddField):
    """The `dictionary` column; on PostgreSQL its foreign key validated without blocking writes
    (ADD COLUMN with a foreign key would scan the whole table under an exclusive lock)."""

    def __init__(self, model_name, table):
        super().__init__(model_name=model_name, name="dictionary", field=dictionary_field())
        self.table = table

    def deconstruct(self):
        return self.__class__.__name__, [], {"model_name": self.model_name, "table": self.table}

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)
            return
        table, constraint = self.table, f"{self.table}_dictionary_id_fk"
        schema_editor.execute(f"ALTER TABLE {table} ADD COLUMN dictionary_id bigint NULL")
        schema_editor.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {constraint} FOREIGN KEY (dictionary_id) "
            "REFERENCES hosts_sectiondictionary (id) DEFERRABLE INITIALLY DEFERRED NOT VALID"
        )
        schema_editor.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {constraint}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("hosts", "0010_seeded_history_trigger"),
    ]

    operations = [
        migrations.CreateModel(
            name="SectionDictionary",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("content", models.BinaryField()),
                ("sha256", models.CharField(max_length=64, unique=True)),
                (
                    "samples",
                    models.PositiveIntegerField(
                        help_text="How many section records it was trained on."
                    ),
                ),
                ("sample_bytes", models.BigIntegerField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={"verbose_name_plural": "section dictionaries"},
        ),
        migrations.AddField(
            model_name="snapshotblob",
            name="packed",
            field=models.BinaryField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="statesnapshot",
            name="raw_packed",
            field=models.BinaryField(blank=True, null=True),
        ),
        AddDictionaryKey("snapshotblob", "hosts_snapshotblob"),
        AddDictionaryKey("statesnapshot", "hosts_statesnapshot"),
        AddIndexConcurrently(
            model_name="snapshotblob",
            index=models.Index(
                condition=models.Q(("dictionary__isnull", False)),
                fields=["dictionary"],
                name="blob_dictionary",
            ),
        ),
        AddIndexConcurrently(
            model_name="statesnapshot",
            index=models.Index(
                condition=models.Q(("dictionary__isnull", False)),
                fields=["dictionary"],
                name="snapshot_dictionary",
            ),
        ),
    ]
