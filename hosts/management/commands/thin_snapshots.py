"""python manage.py thin_snapshots: snapshot retention now, to the end (what beat runs in parts)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from hosts.services import retention


class Command(BaseCommand):
    help = (
        "Thin old snapshots by age (SNAPSHOT_KEEP_ALL_SECONDS, SNAPSHOT_DENSE_EVERY_SECONDS, "
        "SNAPSHOT_KEEP_DENSE_SECONDS, SNAPSHOT_SPARSE_EVERY_SECONDS), keeping every snapshot "
        "that a change, an approval, a host's health or an audit event names, and remove the "
        "raw output no snapshot names any more. Safe to run again, and while probes run."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--time-budget",
            type=float,
            default=None,
            help="stop after this many seconds (the next run goes on); default: run to the end",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        result = retention.snapshots_thin(time_budget=options["time_budget"])
        self.stdout.write(result.summary())
        for tier, until in sorted(result.tiers.items()):
            self.stdout.write(f"  {tier} tier thinned up to {until}")
