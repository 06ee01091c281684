"""python manage.py host_group NAME HOST [HOST ...] [--remove] [--description TEXT]

Put existing hosts into a host group (made when it does not exist yet), or take them out with
--remove. Each host that joins or leaves is audited, as when the admin does it."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from controlplane.audit import context as audit_context
from controlplane.audit.services import SYSTEM_CLI
from hosts import services
from hosts.models import Host


class Command(BaseCommand):
    help = "Put existing hosts into a host group, or (--remove) take them out of it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the host group, e.g. prod or team-a")
        parser.add_argument("hosts", nargs="+", metavar="HOST", help="hosts, by name")
        parser.add_argument("--remove", action="store_true", help="take the hosts out instead")
        parser.add_argument(
            "--description", default="", help="for a group this makes: what it is for"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        names: list[str] = list(dict.fromkeys(options["hosts"]))
        hosts = list(Host.objects.filter(name__in=names))
        unknown = sorted(set(names) - {host.name for host in hosts})
        if unknown:
            raise CommandError(f"no such host: {', '.join(unknown)}")
        with audit_context.acting(SYSTEM_CLI):
            try:
                if options["remove"]:
                    group = services.host_group_leave(hosts=hosts, name=options["name"])
                else:
                    group = services.host_group_join(
                        hosts=hosts, name=options["name"], description=options["description"]
                    )
            except services.HostRefused as exc:
                raise CommandError(exc.message) from exc
        members = sorted(group.hosts.values_list("name", flat=True))
        verb = "Took" if options["remove"] else "Put"
        where = "out of" if options["remove"] else "in"
        self.stdout.write(f"{verb} {', '.join(sorted(names))} {where} {group.name}.")
        self.stdout.write(f"{group.name} holds {len(members)}: {', '.join(members) or 'none'}.")
