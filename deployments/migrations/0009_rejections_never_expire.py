# A rejection never expires: its expires_at is NULL (it used to be the moment it was made), and
# the database holds every grant to an expiry and every rejection to none.

from django.db import migrations, models

REJECTED = "rejected"


def rejections_without_expiry(apps, schema_editor):
    Approval = apps.get_model("deployments", "Approval")
    Approval.objects.filter(decision=REJECTED).update(expires_at=None)


def rejections_expire_when_made(apps, schema_editor):
    # As they were stored before: expires_at was the moment of the rejection.
    Approval = apps.get_model("deployments", "Approval")
    Approval.objects.filter(decision=REJECTED, expires_at__isnull=True).update(
        expires_at=models.F("created_at")
    )


class Migration(migrations.Migration):

    dependencies = [
        ("deployments", "0008_served_name_as_engines_take_it"),
    ]

    operations = [
        migrations.AlterField(
            model_name="approval",
            name="expires_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When a grant stops counting; none for a rejection, which never expires.",
                null=True,
            ),
        ),
        migrations.RunPython(rejections_without_expiry, rejections_expire_when_made),
        migrations.AddConstraint(
            model_name="approval",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("decision", "rejected"), ("expires_at__isnull", True)),
                    models.Q(
                        models.Q(("decision", "rejected"), _negated=True),
                        ("expires_at__isnull", False),
                    ),
                    _connector="OR",
                ),
                name="approval_expires_unless_rejected",
            ),
        ),
    ]
