"""python manage.py audit_stream: how far each destination of the audit stream has got, send to
one now, or replay one from a seq (audited).

    audit_stream status [--json]
    audit_stream send NAME              (now, in this process, ignoring the backoff)
    audit_stream replay NAME --from-seq N --reason "the SIEM lost March"
"""

from __future__ import annotations

import getpass
import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from controlplane.audit import context as audit_context
from controlplane.audit.services import SYSTEM_CLI
from controlplane.audit.streaming import delivery, selectors
from controlplane.audit.streaming import services as streaming
from controlplane.audit.streaming.choices import SendStatus


class Command(BaseCommand):
    help = "Show, send or replay the audit stream's destinations (AUDIT_STREAMS)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        status = sub.add_parser("status", help="each destination's cursor, lag and last error")
        status.add_argument("--json", action="store_true", help="one JSON object per line")
        send = sub.add_parser("send", help="send to a destination now, ignoring the backoff")
        send.add_argument("name")
        replay = sub.add_parser("replay", help="send everything again from a seq, flagged")
        replay.add_argument("name")
        replay.add_argument("--from-seq", type=int, required=True, dest="from_seq")
        replay.add_argument("--reason", required=True, help="why, for the audit log")

    def handle(self, *args: Any, **options: Any) -> None:
        verb = options["verb"]
        if verb == "status":
            self._status(as_json=options["json"])
        elif verb == "send":
            self._send(options["name"])
        else:
            self._replay(options["name"], options["from_seq"], options["reason"])

    def _status(self, *, as_json: bool) -> None:
        statuses = selectors.stream_statuses()
        if as_json:
            for status in statuses:
                self.stdout.write(json.dumps(status.as_dict(), sort_keys=True))
            return
        if not statuses:
            self.stdout.write("No audit streams: set AUDIT_STREAMS to stream the audit log.")
            return
        now = timezone.now()
        for s in statuses:
            where = s.where if s.configured else "(no longer in AUDIT_STREAMS)"
            line = (
                f"{s.name} {s.kind} {where}: delivered #{s.delivered_seq} of #{s.head_seq}, "
                f"{s.lag_events} behind ({s.lag_seconds:.0f} s)"
            )
            if s.redelivered:
                line += f", {s.redelivered} sent again (flagged)"
            if s.sending:
                line += ", sending now"
            if s.last_error:
                retry = ""
                if s.next_attempt_at and s.next_attempt_at > now:
                    retry = f"; next try in {(s.next_attempt_at - now).total_seconds():.0f} s"
                line += f"\n  failing ({s.attempts} attempts): {s.last_error}{retry}"
            self.stdout.write(line)

    def _send(self, name: str) -> None:
        destination = delivery.configured(name)
        if destination is None:
            raise CommandError(f"no audit stream named {name!r} in AUDIT_STREAMS")
        with audit_context.acting(SYSTEM_CLI):
            outcome = delivery.stream_deliver(destination=destination, force=True)
        while outcome.status == SendStatus.MORE:
            with audit_context.acting(SYSTEM_CLI):
                more = delivery.stream_deliver(destination=destination, force=True)
            more.sent += outcome.sent
            more.redelivered += outcome.redelivered
            outcome = more
        report = f"{name}: {outcome.status}, {outcome.sent} sent"
        if outcome.redelivered:
            report += f" ({outcome.redelivered} flagged as sent before)"
        if outcome.status in (SendStatus.FAILED, SendStatus.HALTED):
            raise CommandError(f"{report}: {outcome.error}", returncode=1)
        self.stdout.write(report)

    def _replay(self, name: str, from_seq: int, reason: str) -> None:
        try:
            with audit_context.acting(SYSTEM_CLI):
                cursor = streaming.stream_replay(
                    name=name,
                    from_seq=from_seq,
                    actor=SYSTEM_CLI,
                    reason=reason,
                    os_user=getpass.getuser(),
                )
        except streaming.StreamRefused as exc:
            raise CommandError(exc.message, returncode=1) from None
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages), returncode=1) from None
        self.stdout.write(
            f"{name} will send every event from #{from_seq} again (flagged as sent before); "
            f"its cursor is at #{cursor.delivered_seq}."
        )
