"""python manage.py verify_audit: exit 0 with the event count and head hash, or exit 1 naming
the first broken sequence number and why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from controlplane.audit import checkpoints, services
from controlplane.audit.verification import chain_verify


class Command(BaseCommand):
    help = "Verify the audit log's hash chain against its signed checkpoints."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--checkpoints",
            type=Path,
            help="checkpoint file to check against (default: AUDIT_CHECKPOINT_DIR's)",
        )
        parser.add_argument(
            "--no-record",
            action="store_true",
            help="do not store the result for the history page (e.g. on a read-only replica)",
        )
        parser.add_argument(
            "--public-key",
            action="store_true",
            help="print the checkpoint signing key's public half and exit",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["public_key"]:
            key = checkpoints.signing_key().public_key()
            self.stdout.write(
                f"{checkpoints.public_key_text(key)} (key id {checkpoints.key_id(key)})"
            )
            return
        if options["no_record"]:
            result = chain_verify(checkpoint_path=options["checkpoints"])
        else:
            result = services.verification_run(
                trigger="cli", checkpoint_path=options["checkpoints"]
            )
        if not result.ok:
            raise CommandError(
                f"audit log broken at seq {result.broken_seq} ({result.problem}): {result.reason}",
                returncode=1,
            )
        last = result.last_checkpoint
        anchored = f"last checkpoint #{last.seq} at {last.time}" if last else "no checkpoints yet"
        self.stdout.write(
            f"OK {result.events} events, head hash {result.head_hash}\n"
            f"{result.checkpoints} checkpoints, {anchored}; "
            f"{result.events / max(result.duration_seconds, 1e-9):,.0f} events/s"
        )
