"""python manage.py sudoers_entry [--user deploy] [--host NAME [--engine-version V]]"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from hosts import sudoers
from hosts.models import Host


class Command(BaseCommand):
    help = (
        f"Print the {sudoers.SUDOERS_PATH} entry: what the control plane runs under `sudo -n`. "
        "Without --host, the example docs/operations/hosts.md shows (the demo fleet's "
        "environment file and the default engine install)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--user",
            default="",
            help=f"the SSH user (default: the host's, or {sudoers.EXAMPLE_USER} without --host)",
        )
        parser.add_argument(
            "--host",
            default="",
            help="a registered host: its deployments' environment files and engine installs",
        )
        parser.add_argument(
            "--engine-version",
            default="",
            help="with --host: the engine version repair reinstalls (default: the version the "
            "newest integrity check found)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user: str = options["user"]
        try:
            if options["host"]:
                host = Host.objects.filter(name=options["host"]).first()
                if host is None:
                    raise CommandError(f"no host named {options['host']!r}")
                text, notes = sudoers.host_entry(
                    host=host, user=user, engine_version=options["engine_version"]
                )
            elif options["engine_version"]:
                raise CommandError("--engine-version needs --host")
            else:
                text, notes = sudoers.example_entry(user or sudoers.EXAMPLE_USER), []
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        for note in notes:
            self.stderr.write(f"note: {note}")
        self.stdout.write(text, ending="")
