"""python manage.py backfill_gpu_samples [--batch N]: chart rows for snapshots taken before them."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from hosts import services


class Command(BaseCommand):
    help = (
        "Write GPU samples (the host charts' rows) for ok/partial snapshots that have none. "
        "Safe to run again, and while probes run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch",
            type=int,
            default=services.samples.BACKFILL_BATCH,
            help="snapshots per transaction (default %(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        snapshots, samples = services.gpu_samples_backfill(batch_size=max(1, options["batch"]))
        self.stdout.write(f"{samples} GPU samples written for {snapshots} snapshots")
