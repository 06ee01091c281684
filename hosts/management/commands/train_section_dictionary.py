"""python manage.py train_section_dictionary: a new zstd dictionary for probe sections."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from hosts.services import dictionaries


class Command(BaseCommand):
    help = (
        "Train a zstd dictionary on the newest snapshots' raw sections and compress what is "
        "stored from now on with it. Run it once the fleet has been probed for a while, and "
        "again when the fleet changes (new GPUs, engines, units); the dictionaries older "
        "sections were compressed with stay until retention has removed those sections."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--size", type=int, default=dictionaries.DICTIONARY_BYTES)
        parser.add_argument(
            "--snapshots",
            type=int,
            default=dictionaries.SAMPLE_SNAPSHOTS,
            help="train on the sections of this many of the newest snapshots",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            made = dictionaries.section_dictionary_train(
                size=options["size"], snapshots=options["snapshots"]
            )
        except dictionaries.DictionaryNotTrained as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"section dictionary {made.pk}: {len(made.content)} bytes, trained on "
            f"{made.samples} distinct sections ({made.sample_bytes} bytes)"
        )
