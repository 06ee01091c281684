"""A Prometheus collector that reads the database on every scrape.

Nothing here is a process-global counter mutated by request code: each scrape asks the
database (monitoring.selectors) and turns rows into metric families, so every web process
answers the same numbers and a restart loses nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from controlplane.accounts.roles import Scope
from deployments.choices import ChangeKind, ChangeStatus
from hosts.choices import HostKeyStatus, SnapshotStatus, Verdict
from hosts.state import ServerState

from . import selectors
from .annotations import EVENT_SOURCES
from .audit_streams import audit_stream_families
from .evaluations import evaluation_families
from .gpu_faults import add_gpu_faults, gpu_fault_family_set

MIB = 1048576
# A probe that reached the host and ran its script; anything else says the host is not seen.
UP_STATUSES = {SnapshotStatus.OK, SnapshotStatus.PARTIAL}

# (metric suffix, GPU field in the parsed snapshot, scale, help)
GPU_GAUGES: tuple[tuple[str, str, float, str], ...] = (
    ("memory_used_bytes", "memory_used_mib", MIB, "GPU memory in use (nvidia-smi memory.used)."),
    ("memory_total_bytes", "memory_total_mib", MIB, "GPU memory in total (memory.total)."),
    ("power_draw_watts", "power_draw_w", 1, "GPU power draw (power.draw)."),
    ("power_limit_watts", "power_limit_w", 1, "GPU power limit (power.limit)."),
    ("utilization_ratio", "utilization_pct", 0.01, "GPU utilisation, 0 to 1 (utilization.gpu)."),
    ("temperature_celsius", "temperature_c", 1, "GPU temperature (temperature.gpu)."),
)


def _gauge(name: str, documentation: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"controlplane_{name}", documentation, labels=list(labels))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class ControlPlaneCollector:
    """Everything the control plane knows, as gauges, rebuilt from the database per scrape: of
    every host, or of the hosts one person's `scope` sees."""

    def __init__(self, scope: Scope | None = None) -> None:
        self.scope = scope

    def describe(self) -> list[Metric]:
        # Registering must not query the database (it happens at import time).
        return []

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        data = selectors.fleet_metrics(scope=self.scope)
        yield from self._host_families(data)
        yield from self._fleet_families(data)
        yield from evaluation_families(selectors.exposed_evaluations(self.scope))
        for source in EVENT_SOURCES:
            yield from source.collect(data.now, self.scope)
        took = _gauge("metrics_collect_seconds", "Time this scrape spent reading the database.")
        took.add_metric([], time.perf_counter() - started)
        yield took

    def _host_families(self, data: selectors.FleetMetrics) -> Iterator[Metric]:
        families = _host_family_set()
        for host in data.hosts:
            _add_host(families, host, data)
        yield from families.values()

    def _fleet_families(self, data: selectors.FleetMetrics) -> Iterator[Metric]:
        outcomes = _gauge(
            "probe_outcomes",
            "Snapshots taken per host and status within the trailing window "
            "(controlplane_probe_outcomes_window_seconds). Not a counter: it goes down as old "
            "snapshots leave the window.",
            ["host", "status"],
        )
        for host in data.hosts:
            for choice in SnapshotStatus.values:
                outcomes.add_metric(
                    [host.name, choice], float(data.probe_outcomes.get((host.id, choice), 0))
                )
        window = _gauge(
            "probe_outcomes_window_seconds", "The window controlplane_probe_outcomes counts over."
        )
        window.add_metric([], float(data.probe_window_seconds))
        # Every kind and status is present, zeros included, so increase() and alerts see the
        # first failure as a change from 0 rather than as a new series.
        changes = _gauge(
            "change_requests",
            "Change requests by kind and current status, all time. Final statuses only grow.",
            ["kind", "status"],
        )
        for kind in ChangeKind.values:
            for choice in ChangeStatus.values:
                changes.add_metric([kind, choice], float(data.changes.get((kind, choice), 0)))
        waiting = _gauge("approvals_waiting", "Change requests waiting for a second person.")
        waiting.add_metric(
            [],
            float(sum(n for (_, s), n in data.changes.items() if s == "pending_approval")),
        )
        oldest = _gauge(
            "approval_oldest_waiting_seconds",
            "How long the oldest request has waited for approval (0 when none waits).",
        )
        oldest.add_metric(
            [],
            (data.now - data.oldest_waiting).total_seconds() if data.oldest_waiting else 0.0,
        )
        yield from (outcomes, window, changes, waiting, oldest)
        yield from self._verification_families(data)
        yield from audit_stream_families()

    def _verification_families(self, data: selectors.FleetMetrics) -> Iterator[Metric]:
        ok = _gauge(
            "audit_verification_ok",
            "1 if the newest walk over the audit chain and its checkpoints found it intact. "
            "Absent until the first verification.",
        )
        events = _gauge("audit_verification_events", "Events the newest verification checked.")
        when = _gauge(
            "audit_verification_timestamp_seconds", "When the newest verification ran (Unix time)."
        )
        took = _gauge("audit_verification_duration_seconds", "How long it took.")
        result = data.verification
        if result is not None:
            ok.add_metric([], 1.0 if result.ok else 0.0)
            events.add_metric([], float(result.events))
            when.add_metric([], result.started_at.timestamp())
            took.add_metric([], result.duration_ms / 1000)
        yield from (ok, events, when, took)


# (name, help, labels) of every per-host family, in the order they are exposed.
HOST_FAMILIES: tuple[tuple[str, str, list[str]], ...] = (
    *(
        (f"gpu_{suffix}", text + " From the host's newest snapshot.", ["host", "gpu", "uuid"])
        for suffix, _, _, text in GPU_GAUGES
    ),
    ("host_enabled", "1 if the host is probed on schedule.", ["host"]),
    (
        "probe_interval_seconds",
        "How often the host is probed on schedule: what an alert on stale snapshots compares "
        "their age with.",
        ["host"],
    ),
    (
        "host_maintenance",
        "1 while the host is in maintenance (rollouts skip it, its verdict sends no webhooks; "
        "it is still probed), 0 otherwise.",
        ["host"],
    ),
    (
        "host_maintenance_end_timestamp_seconds",
        "When the host's maintenance ends (Unix time); absent when it is not in maintenance.",
        ["host"],
    ),
    (
        "host_verdict",
        "1 for the host's health verdict (healthy, changing, degraded, unknown, failed), 0 for "
        "the others; the same verdict, from the same evidence, as the fleet page. changing: a "
        "change job of the control plane runs on the host and explains all that is off.",
        ["host", "verdict"],
    ),
    (
        "host_up",
        "1 if the newest probe reached the host and ran (status ok or partial); 0 otherwise, "
        "including hosts never probed.",
        ["host"],
    ),
    ("host_key_status", "1 for the host's SSH key status, 0 for the others.", ["host", "status"]),
    (
        "snapshot_status",
        "1 for the status of the host's newest snapshot, 0 for the others.",
        ["host", "status"],
    ),
    ("snapshot_timestamp_seconds", "When the newest snapshot was taken (Unix time).", ["host"]),
    ("snapshot_age_seconds", "Age of the newest snapshot at scrape time.", ["host"]),
    ("probe_duration_seconds", "How long the probe behind the newest snapshot took.", ["host"]),
    (
        "service_active",
        "1 if systemd reports the unit active in the newest snapshot.",
        ["host", "unit"],
    ),
    ("server_healthy", "1 if the unit's inference server answered /health.", ["host", "unit"]),
    ("requests_running", "Requests being processed (the server's own /metrics).", ["host", "unit"]),
    ("requests_waiting", "Requests queued (the server's own /metrics).", ["host", "unit"]),
    (
        "model_served_info",
        "1 per model id the unit's server lists in /v1/models, with its root (path or id).",
        ["host", "unit", "model", "root"],
    ),
)


def _host_family_set() -> dict[str, GaugeMetricFamily]:
    families = {name: _gauge(name, text, labels) for name, text, labels in HOST_FAMILIES}
    return families | gpu_fault_family_set(GaugeMetricFamily)


def _add_host(
    families: dict[str, GaugeMetricFamily], host: Any, data: selectors.FleetMetrics
) -> None:
    name = host.name
    families["host_enabled"].add_metric([name], 1.0 if host.enabled else 0.0)
    if host.probe_interval_seconds is not None:
        families["probe_interval_seconds"].add_metric([name], float(host.probe_interval_seconds))
    until = host.maintenance_until
    in_maintenance = until is not None and data.now < until  # as Host.in_maintenance says
    families["host_maintenance"].add_metric([name], float(in_maintenance))
    if in_maintenance:
        families["host_maintenance_end_timestamp_seconds"].add_metric([name], until.timestamp())
    for verdict in Verdict.values:
        families["host_verdict"].add_metric([name, verdict], float(verdict == host.verdict))
    for choice in HostKeyStatus.values:
        families["host_key_status"].add_metric(
            [name, choice], float(choice == host.host_key_status)
        )
    snapshot = host.snapshot
    up = snapshot is not None and snapshot.status in UP_STATUSES
    families["host_up"].add_metric([name], float(up))
    if snapshot is None:
        return
    for choice in SnapshotStatus.values:
        families["snapshot_status"].add_metric([name, choice], float(choice == snapshot.status))
    families["snapshot_timestamp_seconds"].add_metric([name], snapshot.taken_at.timestamp())
    families["snapshot_age_seconds"].add_metric([name], snapshot.age_seconds(data.now))
    families["probe_duration_seconds"].add_metric([name], snapshot.duration_ms / 1000)
    state = snapshot.state()
    for reading in state.gpus:
        labels = [name, str(reading.index), str(reading.uuid or "")]
        for suffix, key, scale, _ in GPU_GAUGES:
            value = _number(getattr(reading, key))
            if value is not None:
                families[f"gpu_{suffix}"].add_metric(labels, value * scale)
    add_gpu_faults(families, name, state)
    for unit, dep in sorted(state.deployments.items()):
        families["service_active"].add_metric(
            [name, unit], float(dep.unit.active_state == "active")
        )
        families["server_healthy"].add_metric([name, unit], float(dep.server.healthy))
        for family, value in (
            ("requests_running", dep.server.requests_running),
            ("requests_waiting", dep.server.requests_waiting),
        ):
            if _number(value) is not None:
                families[family].add_metric([name, unit], float(value or 0))
        for model, root in _model_roots(dep.server):
            families["model_served_info"].add_metric([name, unit, model, root], 1.0)


def _model_roots(server: ServerState) -> list[tuple[str, str]]:
    """Pair served ids with their roots; /v1/models may leave roots out, so pair only when the
    lists line up, and otherwise give every id all the roots there are."""
    models = [str(m) for m in server.models]
    roots = [str(r) for r in server.model_roots]
    if len(roots) == len(models):
        return list(zip(models, roots, strict=True))
    return [(model, ",".join(roots)) for model in models]


@cache
def registry() -> CollectorRegistry:
    """One registry per process holding only the control plane's collector, of every host:
    what a scraper with METRICS_TOKEN reads."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ControlPlaneCollector())
    return reg


def registry_for(scope: Scope) -> CollectorRegistry:
    """A registry of the hosts `scope` sees, for a person signed in (made per request)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ControlPlaneCollector(scope))
    return reg
