"""Put a simulated fleet into the database, exactly as an operator would register real hosts.

This is the one place the product meets the simulator. The `simulator` package is standalone
(it imports nothing from the product); it hands over plain registration data (each host's
`SimHostInfo` from `SimFleet.registration_info()`, the client key, and `simulator.catalog`),
and this module turns that data into Credential, Host, ModelArtifact and Deployment rows.

Shared by `simfleet --register` and the `registered_fleet` test fixture so both exercise the
same service functions (and write the same audit events). Synchronous ORM code: call it
outside the simulator's event loop.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable

import asyncssh
from django.db import transaction
from django.utils import timezone

from controlplane.audit.context import acting
from deployments.choices import DrainHookKind
from deployments.models import Deployment, DrainHook, ModelArtifact
from hosts import services
from hosts.choices import ProbeTrigger, SnapshotStatus
from hosts.models import Credential, Host, StateSnapshot
from hosts.services.samples import gpu_samples_record
from hosts.state import GpuState, snapshot_digest
from simulator.catalog import (
    CATALOG,
    DEFAULT_MODEL,
    DEFAULT_PORT,
    DEFAULT_TP,
    DEFAULT_UNIT,
    LB_AGENT_PORT,
    LB_DRAIN,
)
from simulator.server import SimHostInfo
from simulator.ssh_host import SimHost

ACTOR = "system:cli"
CREDENTIAL_NAME = "simfleet"


def _normalise(key: str) -> str:
    return asyncssh.import_public_key(key.strip()).export_public_key("openssh").decode().strip()


def ensure_catalog() -> dict[tuple[str, str], ModelArtifact]:
    artifacts = {}
    for model in CATALOG:
        artifact, _created = ModelArtifact.objects.get_or_create(
            name=model.name,
            variant=model.variant,
            defaults={
                "weights_gib": model.weights_gib,
                "path": model.path,
                "served_name": model.served_name,
            },
        )
        artifacts[(model.name, model.variant)] = artifact
    return artifacts


def _ensure_credential(private_key: str, name: str) -> Credential:
    credential = Credential.objects.filter(name=name).first()
    if credential is None:
        return services.credential_create(name=name, private_key=private_key)
    fingerprint = asyncssh.import_private_key(private_key).get_fingerprint("sha256")
    if credential.fingerprint != fingerprint:
        credential.set_private_key(private_key)
        credential.save()
    return credential


def _ensure_host(info: SimHostInfo, address: str, credential: Credential) -> Host:
    host = Host.objects.filter(name=info.name).first()
    if host is None:
        host = services.host_create(
            name=info.name,
            address=address,
            port=info.port,
            username="root",
            use_sudo=True,
            credential=credential,
        )
    else:
        wanted = {
            "address": address,
            "port": info.port,
            "username": "root",
            "use_sudo": True,
            "credential_id": credential.pk,
        }
        changed = [field for field, value in wanted.items() if getattr(host, field) != value]
        if changed:
            for field in changed:
                setattr(host, field, wanted[field])
            host.full_clean()
            host.save(update_fields=[f.removesuffix("_id") for f in changed])
    key = _normalise(info.public_key)
    if host.host_key != key:
        host = services.host_key_accept(
            host=host, key=key, actor=ACTOR, reason="registered by simfleet"
        )
    return host


def _ensure_deployment(host: Host, model: ModelArtifact) -> None:
    if Deployment.objects.filter(host=host, unit=DEFAULT_UNIT).exists():
        return
    if Deployment.objects.filter(host=host, port=DEFAULT_PORT).exists():
        return  # someone deployed something else on the port; leave their row alone
    deployment = Deployment(
        host=host,
        unit=DEFAULT_UNIT,
        model=model,
        port=DEFAULT_PORT,
        tensor_parallel_size=DEFAULT_TP,
        max_model_len=DEFAULT_MODEL.max_model_len,
    )
    deployment.full_clean()
    deployment.save()


def ensure_drain_hooks() -> list[DrainHook]:
    """The simulated hosts' load balancer, as the drain hooks an administrator would define for
    it: its client on the host (`lb-drain`), and its HTTP agent on the host's loopback."""
    agent = f"http://127.0.0.1:{LB_AGENT_PORT}/v1/backends/{{host}}"
    hooks = [
        DrainHook(
            name="sim-lb",
            description="The simulated load balancer's client on the host",
            kind=DrainHookKind.COMMAND,
            drain_command=f"{LB_DRAIN} out --backend {{host}}",
            undrain_command=f"{LB_DRAIN} in --backend {{host}}",
        ),
        DrainHook(
            name="sim-lb-http",
            description="The simulated load balancer's HTTP agent, called from the host",
            kind=DrainHookKind.HTTP,
            drain_url=f"{agent}/drain",
            undrain_url=f"{agent}/undrain",
        ),
    ]
    rows = []
    for hook in hooks:
        row = DrainHook.objects.filter(name=hook.name).first()
        if row is None:
            hook.full_clean()
            hook.save()
            row = hook
        rows.append(row)
    return rows


def register_fleet(
    hosts: Iterable[SimHostInfo],
    *,
    client_private_key: str,
    address: str = "127.0.0.1",
    credential_name: str = CREDENTIAL_NAME,
) -> list[Host]:
    """Create or update the credential, hosts, pinned keys, catalog, the simulated load
    balancer's drain hooks and the deployments.

    Idempotent: running it again changes only what differs (a new port, a regenerated key).
    """
    with acting(ACTOR), transaction.atomic():
        credential = _ensure_credential(client_private_key, credential_name)
        artifacts = ensure_catalog()
        ensure_drain_hooks()
        default_model = artifacts[(DEFAULT_MODEL.name, DEFAULT_MODEL.variant)]
        rows = []
        for info in hosts:
            host = _ensure_host(info, address, credential)
            _ensure_deployment(host, default_model)
            rows.append(host)
        return rows


# The demo's seeded history: a point every ten minutes, ending ten minutes before it starts
# (older than any snapshot a change may rest on, so the first real probe is the newest) or
# before the host's own first snapshot, whichever is earlier.
HISTORY_EVERY = dt.timedelta(minutes=10)
HISTORY_GAP = dt.timedelta(minutes=10)
_GPU_FIELDS = [f.name for f in dataclasses.fields(GpuState)]


def seed_gpu_history(
    sim_hosts: Iterable[SimHost], *, hours: float, now: dt.datetime | None = None
) -> int:
    """The last `hours` of GPU history for each simulated host, where it has none of its own,
    so that a fresh demo's charts show what they are for: an ok snapshot every ten minutes
    holding only the GPU readings the simulator computes for that moment (simulator.state.gpus.
    gpu_history), with its samples, marked as seeded (trigger `history`). It ends before the
    host's own first snapshot: a demo started again on its database seeds nothing it already
    has. Returns the snapshots written."""
    now = now or timezone.now()
    start = now - HISTORY_GAP - dt.timedelta(hours=hours)
    written = 0
    for sim in sim_hosts:
        host = Host.objects.filter(name=sim.name).first()
        if host is None:
            continue
        end = now - HISTORY_GAP
        first = host.snapshots.order_by("taken_at").values_list("taken_at", flat=True).first()
        if first is not None:
            end = min(end, first - HISTORY_EVERY)
        if end <= start:
            continue
        history = sim.machine.gpu_history(
            start_wall=start.timestamp(),
            end_wall=end.timestamp(),
            every_seconds=HISTORY_EVERY.total_seconds(),
        )
        rows = []
        for wall, readings in history:
            parsed = {"gpus": [{k: getattr(r, k) for k in _GPU_FIELDS} for r in readings]}
            rows.append(
                StateSnapshot(
                    host=host,
                    taken_at=dt.datetime.fromtimestamp(wall, tz=dt.UTC),
                    status=SnapshotStatus.OK,
                    trigger=ProbeTrigger.HISTORY,
                    duration_ms=0,
                    parsed=parsed,
                    digest=snapshot_digest(parsed),
                )
            )
        with transaction.atomic():
            snapshots = StateSnapshot.objects.bulk_create(rows)
            gpu_samples_record(snapshots=snapshots)
        written += len(snapshots)
    return written
