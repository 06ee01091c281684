"""python manage.py probe HOST... [--json] [--integrity]: take snapshots now."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from controlplane.audit import context as audit_context
from controlplane.audit.services import SYSTEM_CLI
from hosts import selectors, services
from hosts.choices import ProbeTrigger
from hosts.models import Host


class Command(BaseCommand):
    help = "Probe hosts over SSH now and store a snapshot of each (same code as the Celery task)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("hosts", nargs="+", metavar="HOST", help="host names, or 'all'")
        parser.add_argument("--json", action="store_true", help="print the snapshots as JSON")
        parser.add_argument(
            "--integrity", action="store_true", help="also check the engine's installed files"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        names: list[str] = options["hosts"]
        queryset = Host.objects.select_related("credential").prefetch_related("deployments")
        if names == ["all"]:
            hosts = list(queryset.filter(enabled=True))
        else:
            found = {h.name: h for h in queryset.filter(name__in=names)}
            missing = [n for n in names if n not in found]
            if missing:
                known = ", ".join(Host.objects.values_list("name", flat=True)[:20]) or "none"
                raise CommandError(f"unknown host(s): {', '.join(missing)} (known: {known})")
            hosts = [found[n] for n in names]
        with audit_context.acting(SYSTEM_CLI):
            snapshots = services.hosts_probe(
                hosts=hosts, trigger=ProbeTrigger.CLI, integrity=bool(options["integrity"]) or None
            )
        if options["json"]:
            self.stdout.write(
                json.dumps([selectors.snapshot_as_dict(s) for s in snapshots], indent=2)
            )
            return
        for snap in snapshots:
            summary = selectors.snapshot_summary(snap)
            line = (
                f"{snap.host.name:<16} {snap.status:<18} {snap.duration_ms:>6} ms  "
                f"snapshot {snap.pk}  {summary['service']}  {summary['model'] or '-'}"
            )
            if snap.error:
                line += f"  ({snap.error})"
            self.stdout.write(line)
