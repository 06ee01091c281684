"""Taking snapshots over SSH: each host's probe, one round of them over the (reused)
connections, and a second read for environment files the first one learnt of.

What is stored and audited lives in hosts.services.probe_recording, which hosts are due in
probe_claims, "Probe now" in probe_queue; their public names are importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.utils import timezone

from controlplane.crypto import SecretUnavailable

from .. import commands
from ..choices import HostKeyStatus, ProbeTrigger, SnapshotStatus
from ..models import Host, StateSnapshot
from ..probe import ProbeOutcome, probe_many, section_memos
from ..ssh import SSHTarget, ssh_loop
from .permissions import require_probe_permission
from .probe_claims import claim_expiry_seconds, hosts_claim_due_for_probe, hosts_claim_due_ids
from .probe_queue import QueueUnavailable, probe_enqueue
from .probe_recording import material_digest, snapshot_record, snapshots_record
from .probe_spec import (
    last_seen_states_prefetch,
    seen_states,
    server_specs,
    spec_with_named_files,
)

__all__ = [
    "QueueUnavailable",
    "claim_expiry_seconds",
    "host_probe",
    "host_probe_now",
    "hosts_claim_due_for_probe",
    "hosts_claim_due_ids",
    "hosts_probe",
    "material_digest",
    "probe_enqueue",
    "probe_spec_for",
    "snapshot_record",
    "snapshots_record",
    "ssh_target_for",
]


def probe_spec_for(host: Host, *, integrity: bool, gpu_diagnostic: int = 0) -> commands.ProbeSpec:
    """The probe of `host`: its deployments' servers, with the environment files their units
    named in the host's last snapshot, and a journal tail for a unit last seen failing
    (hosts.services.probe_spec). One query for the last snapshot per host."""
    return commands.ProbeSpec(
        servers=server_specs(host),
        integrity=integrity,
        sudo=host.use_sudo,
        gpu_diagnostic=gpu_diagnostic,
    )


def ssh_target_for(host: Host) -> SSHTarget | None:
    if host.credential is None:
        return None
    return SSHTarget(
        address=host.address,
        port=host.port,
        username=host.username,
        private_key=host.credential.private_key(),
        pinned_key=host.host_key if host.host_key_status == HostKeyStatus.PINNED else "",
    )


def _blocked_outcome(host: Host) -> ProbeOutcome | None:
    """Refuse before connecting when trust is already known to be broken or missing."""
    if host.host_key_status == HostKeyStatus.CHANGED:
        return ProbeOutcome(
            status=SnapshotStatus.HOST_KEY_MISMATCH,
            duration_ms=0,
            error="the host key changed; an admin must accept the new key before any command runs",
            presented_key=host.presented_host_key,
        )
    if host.credential is None:
        return ProbeOutcome(status=SnapshotStatus.ERROR, duration_ms=0, error="no SSH credential")
    return None


def hosts_probe(
    *,
    hosts: list[Host],
    trigger: str,
    integrity: bool | None = None,
    heartbeat: Callable[[], None] | None = None,
    heartbeat_every: float = 10.0,
    gpu_diagnostic: int = 0,
) -> list[StateSnapshot]:
    """Probe hosts concurrently over (reused) SSH connections and store one snapshot each.

    `integrity=None` runs the engine integrity check only on hosts whose interval has passed.
    `heartbeat` is called every `heartbeat_every` seconds while the probes run (a change job
    keeping its lease).
    """
    now = timezone.now()
    jobs: list[tuple[SSHTarget, commands.ProbeSpec]] = []
    plan: list[tuple[Host, bool, ProbeOutcome | None, int | None]] = []
    if len(hosts) > 1:
        last_seen_states_prefetch(hosts)
    for host in hosts:
        check = host.integrity_due(now) if integrity is None else integrity
        blocked = _blocked_outcome(host)
        if blocked is None:
            try:
                target = ssh_target_for(host)
            except SecretUnavailable as exc:
                blocked = ProbeOutcome(status=SnapshotStatus.ERROR, duration_ms=0, error=str(exc))
        if blocked is not None:
            plan.append((host, check, blocked, None))
            continue
        assert target is not None
        plan.append((host, check, None, len(jobs)))
        jobs.append((target, probe_spec_for(host, integrity=check, gpu_diagnostic=gpu_diagnostic)))
    # DCGM's diagnostic takes minutes where a probe takes a second.
    timeout = settings.SSH_COMMAND_TIMEOUT
    if gpu_diagnostic:
        timeout = max(timeout, commands.DIAGNOSTIC_TIMEOUT_SECONDS)
    outcomes = _run_probes(jobs, heartbeat, heartbeat_every, timeout)
    # Units that turned out to name environment files this probe did not read: read them now.
    again = {}
    for i, ((target, spec), outcome) in enumerate(zip(jobs, outcomes, strict=True)):
        respec = spec_with_named_files(spec, outcome.parsed) if outcome.parsed else None
        if respec is not None:
            again[i] = (target, respec)
    if again:
        redone = _run_probes(list(again.values()), heartbeat, heartbeat_every, timeout)
        for i, second in zip(again, redone, strict=True):
            outcomes[i] = second
    items = []
    for host, check, blocked, index in plan:
        chosen = blocked if index is None else outcomes[index]
        assert chosen is not None
        items.append((host, chosen, check))
    stored = snapshots_record(items=items, trigger=trigger)
    seen_states.keep(stored)  # the next round's specs read these instead of the database
    return stored


def _run_probes(
    jobs: list[tuple[SSHTarget, commands.ProbeSpec]],
    heartbeat: Callable[[], None] | None,
    every: float,
    command_timeout: float,
) -> list[ProbeOutcome]:
    if not jobs:
        return []

    async def round_of_probes() -> list[ProbeOutcome]:
        pool = ssh_loop.pool
        await pool.close_idle(settings.SSH_IDLE_SECONDS)
        section_memos.forget_idle(settings.SSH_IDLE_SECONDS)  # what their last probes read
        return await probe_many(
            pool,
            jobs,
            concurrency=settings.PROBE_CONCURRENCY,
            connect_timeout=settings.SSH_CONNECT_TIMEOUT,
            command_timeout=command_timeout,
        )

    return ssh_loop.call(round_of_probes(), heartbeat=heartbeat, every=every)


def host_probe(
    *,
    host: Host,
    trigger: str,
    integrity: bool | None = None,
    heartbeat: Callable[[], None] | None = None,
    heartbeat_every: float = 10.0,
    gpu_diagnostic: int = 0,
) -> StateSnapshot:
    return hosts_probe(
        hosts=[host],
        trigger=trigger,
        integrity=integrity,
        heartbeat=heartbeat,
        heartbeat_every=heartbeat_every,
        gpu_diagnostic=gpu_diagnostic,
    )[0]


def host_probe_now(*, host: Host, user: Any, integrity: bool | None = None) -> StateSnapshot:
    """A person's "Probe now", run here and now (the API without `async`): an operator or an
    approver of the host, which must be in their scope."""
    require_probe_permission(user, host)
    return host_probe(host=host, trigger=ProbeTrigger.MANUAL, integrity=integrity)
