"""What a change job sends to its host: every command fenced by the lease before it starts,
the lease renewed while it runs, and the command line and output kept in the step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings

from controlplane.audit import context as audit_context
from hosts import commands, parsers
from hosts import services as host_services
from hosts.choices import ProbeTrigger
from hosts.models import Host, StateSnapshot
from hosts.ssh import CommandResult
from hosts.state import UnitState

from ..models import JobStep
from . import lease as leases
from .outcomes import VerificationFailed
from .steps import MAX_OUTPUT_CHARS


class HostShell:
    def __init__(
        self,
        host: Host,
        lease: leases.Lease,
        correlation_id: str,
        on_snapshot: Callable[[StateSnapshot], None] | None = None,
    ) -> None:
        self.host = host
        self.lease = lease
        self.correlation_id = correlation_id
        # Told of each snapshot the job takes: the steps from then on rest on it.
        self.on_snapshot = on_snapshot

    def run(
        self,
        step: JobStep,
        argv: list[str],
        *,
        stdin: str | None = None,
        timeout: float | None = None,
    ) -> CommandResult:
        self.lease.renew()
        line = host_services.command_line_for(self.host, argv)
        step.command = f"{step.command}\n{line}".strip()
        # Written down before it is sent: if the worker dies while the step runs, the step's
        # audit event is never written, and recovery reads the lines from here instead.
        JobStep.objects.filter(pk=step.pk).update(command=step.command)
        result = host_services.host_run(
            host=self.host,
            argv=argv,
            stdin=stdin,
            timeout=min(timeout or settings.JOB_COMMAND_TIMEOUT_SECONDS, longest_command()),
            heartbeat=self.lease.renew,
            heartbeat_every=leases.heartbeat_every(),
        )
        step.exit_status = result.exit_status
        step.output = (step.output + result.stdout + result.stderr)[-MAX_OUTPUT_CHARS:]
        return result

    def api_key(self, step: JobStep, unit: str) -> str | None:
        """The key `unit`'s server takes, read on the host (hosts.services.host_api_key). Its
        command lines go into the step like every command's; its output, the key, nowhere."""

        def record(script: str) -> None:
            step.command = f"{step.command}\n{script.strip()}".strip()
            JobStep.objects.filter(pk=step.pk).update(command=step.command)

        self.lease.renew()
        return host_services.host_api_key(host=self.host, unit=unit, on_command=record)

    def run_or_fail(self, step: JobStep, argv: list[str], **kwargs: Any) -> CommandResult:
        result = self.run(step, argv, **kwargs)
        if result.exit_status != 0:
            raise VerificationFailed(f"`{commands.join(argv)}` exited {result.exit_status}")
        return result

    def unit_state(self, step: JobStep, unit: str) -> UnitState | None:
        result = self.run(step, commands.unit_show(unit))
        try:
            return parsers.parse_systemctl_show(result.stdout, unit)
        except parsers.ParseError:
            return None

    def probe(self, *, integrity: bool | None = None) -> StateSnapshot:
        """A snapshot taken for the job, in the job's audit thread, under its lease (with the
        engine integrity check when `integrity`, or when the host's interval says it is due)."""
        with audit_context.acting(correlation_id=self.correlation_id):
            self.lease.renew()
            snapshot = host_services.host_probe(
                host=self.host,
                trigger=ProbeTrigger.JOB,
                integrity=integrity,
                heartbeat=self.lease.renew,
                heartbeat_every=leases.heartbeat_every(),
            )
        if self.on_snapshot is not None:
            self.on_snapshot(snapshot)
        return snapshot


def longest_command() -> float:
    return float(max(settings.JOB_COMMAND_TIMEOUT_SECONDS, settings.SSH_COMMAND_TIMEOUT))
