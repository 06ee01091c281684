"""One change job's working parts: its lease, step journal, host shell and clock."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from controlplane.clock import SYSTEM_CLOCK, Clock

from ..choices import ChangeStatus
from ..models import ChangeRequest, Evaluation, JobStep
from . import lease as leases
from .outcomes import JobEnded
from .shell import HostShell
from .steps import StepJournal


class Job:
    def __init__(self, change: ChangeRequest, clock: Clock = SYSTEM_CLOCK) -> None:
        self.change = change
        self.host = change.host
        self.deployment = change.deployment
        self.clock = clock
        self.lease = leases.Lease(change, clock)
        self.journal = StepJournal(change, clock)
        self.shell = HostShell(
            change.host, self.lease, change.correlation_id, on_snapshot=self.journal.rest_on
        )
        # The port the written unit listens on: the revision's, not the deployment row's, which
        # an administrator may have edited since the decision.
        revision = change.target_revision or change.from_revision
        self.port = revision.port if revision is not None else self.deployment.port
        # The coherence suite run on what served before the first destructive command, if the
        # unit was serving: a host that was already broken is reported as such.
        self.baseline: Evaluation | None = None
        # Whether the host was put back in rotation after a drained change, and if not why
        # (deployments.execution.drain.put_back): the final status says it.
        self.drain_report: dict[str, Any] | None = None

    @contextlib.contextmanager
    def step(self, name: str, *, check_cancel: bool = True) -> Iterator[JobStep]:
        with self.journal.step(name, check_cancel=check_cancel) as step:
            yield step

    def destructive(self) -> None:
        """From here on the job finishes (or rolls back) rather than stop on a cancel."""
        self.journal.destructive_started = True

    def take_lease(self) -> None:
        try:
            self.lease.take()
        except leases.LeaseTaken as exc:
            raise JobEnded(ChangeStatus.FAILED, str(exc)) from exc

    def fence(self) -> None:
        """Renew the lease if, and only if, it is still ours; otherwise stop acting at once."""
        self.lease.renew()

    def release_lease(self) -> None:
        self.lease.release()
