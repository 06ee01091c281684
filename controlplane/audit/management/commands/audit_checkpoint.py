"""python manage.py audit_checkpoint: sign the chain head into the checkpoint file now, as
beat does every AUDIT_CHECKPOINT_SECONDS (for cron setups, and before a backup)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from controlplane.audit import services
from controlplane.audit.checkpoints import CheckpointRefused


class Command(BaseCommand):
    help = "Append a signed checkpoint of the audit chain head."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            written = services.checkpoint_write()
        except CheckpointRefused as exc:
            raise CommandError(str(exc), returncode=1) from exc
        if written is None:
            self.stdout.write("Nothing new since the last checkpoint.")
        else:
            self.stdout.write(f"Checkpoint #{written.seq} {written.hash} at {written.time}.")
