"""The `changing` verdict (a change job of the control plane's own runs on the host) sorts
between healthy and degraded: the stored severities above healthy move up by one."""

from django.db import migrations, models
from django.db.models import F

# Before: healthy 0, degraded 1, unknown 2, failed 3. After: healthy 0, changing 1, degraded 2,
# unknown 3, failed 4.


def forwards(apps, schema_editor):
    HostHealth = apps.get_model("hosts", "HostHealth")
    HostHealth.objects.filter(severity__gte=1).update(severity=F("severity") + 1)


def backwards(apps, schema_editor):
    HostHealth = apps.get_model("hosts", "HostHealth")
    # A host judged `changing` becomes `degraded` (the closest of the old levels); the next
    # probe round decides it again anyway.
    HostHealth.objects.filter(verdict="changing").update(verdict="degraded", severity=2)
    HostHealth.objects.filter(severity__gte=2).update(severity=F("severity") - 1)


class Migration(migrations.Migration):
    dependencies = [
        ("hosts", "0006_snapshot_newest_index_with_id"),
    ]

    operations = [
        migrations.AlterField(
            model_name="hosthealth",
            name="verdict",
            field=models.CharField(
                choices=[
                    ("healthy", "healthy"),
                    ("changing", "changing"),
                    ("degraded", "degraded"),
                    ("unknown", "unknown"),
                    ("failed", "failed"),
                ],
                default="unknown",
                max_length=10,
            ),
        ),
        migrations.AlterField(
            model_name="hosthealth",
            name="severity",
            field=models.PositiveSmallIntegerField(default=3),
        ),
        migrations.RunPython(forwards, backwards),
    ]
