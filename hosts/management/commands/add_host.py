"""python manage.py add_host NAME --address ADDR [--port 22] [--user root] [--key-file PATH]
[--sudo] [--accept-host-key] [--group NAME ...]"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from controlplane.audit import context as audit_context
from controlplane.audit.services import SYSTEM_CLI
from hosts import services
from hosts.models import Credential, Host
from hosts.ssh import SSHFailure, fetch_host_key, ssh_loop


class Command(BaseCommand):
    help = "Register a GPU host reached over SSH."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--address", required=True)
        parser.add_argument("--port", type=int, default=22)
        parser.add_argument("--user", default="root")
        parser.add_argument("--key-file", type=Path, help="SSH private key (stored encrypted)")
        parser.add_argument("--sudo", action="store_true", help="prefix changes with `sudo -n`")
        parser.add_argument(
            "--accept-host-key",
            action="store_true",
            help="pin the key the host presents now (audited); otherwise accept it in the UI",
        )
        parser.add_argument(
            "--group",
            action="append",
            default=[],
            metavar="NAME",
            help="put the host in this host group (repeatable); an unknown group is created",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name: str = options["name"]
        if Host.objects.filter(name=name).exists():
            raise CommandError(f"a host named {name!r} already exists")
        key_text = None
        if options["key_file"] is not None:
            try:
                key_text = options["key_file"].read_text()
            except OSError as exc:
                raise CommandError(f"cannot read {options['key_file']}: {exc.strerror}") from exc
        presented = None
        if options["accept_host_key"]:
            try:
                presented = ssh_loop.call(fetch_host_key(options["address"], options["port"]))
            except SSHFailure as exc:
                raise CommandError(exc.message) from exc
        with audit_context.acting(SYSTEM_CLI), transaction.atomic():
            try:
                credential = self._credential(name, key_text)
                host = services.host_create(
                    name=name,
                    address=options["address"],
                    port=options["port"],
                    username=options["user"],
                    use_sudo=options["sudo"],
                    credential=credential,
                )
            except ValidationError as exc:
                raise CommandError(_messages(exc)) from exc
            if presented:
                services.host_key_accept(
                    host=host, key=presented, actor=SYSTEM_CLI, reason="add_host --accept-host-key"
                )
            try:
                for group in dict.fromkeys(options["group"]):
                    services.host_group_join(hosts=[host], name=group)
            except services.HostRefused as exc:
                raise CommandError(f"--group: {exc.message}") from exc
        self.stdout.write(f"Registered {host.name} ({host.username}@{host.address}:{host.port}).")
        if options["group"]:
            self.stdout.write(f"In host groups: {', '.join(sorted(set(options['group'])))}.")
        if presented:
            self.stdout.write(f"Pinned host key {host.host_key_fingerprint}.")
        else:
            self.stdout.write("Host key not pinned yet: an admin accepts it on the host page.")

    def _credential(self, name: str, key_text: str | None) -> Credential | None:
        if key_text is None:
            return None
        probe = Credential()
        probe.set_private_key(key_text)
        existing = Credential.objects.filter(fingerprint=probe.fingerprint).first()
        if existing:
            return existing
        return services.credential_create(name=f"{name}-key", private_key=key_text)


def _messages(exc: ValidationError) -> str:
    if hasattr(exc, "message_dict"):
        return "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
    return " ".join(exc.messages)
