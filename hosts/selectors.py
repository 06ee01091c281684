"""Reads about hosts and snapshots, shaped for pages, the CLI and the API."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any

from django.conf import settings
from django.core.paginator import Page
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KeyTransform
from django.utils import formats, timezone

from controlplane.paging import numbered_page
from controlplane.redaction import REDACTED, is_secret_name, redact_data, redact_text

from .choices import VERDICT_SEVERITY, SnapshotStatus, Verdict
from .gpu_facts import gpu_fault_notes, nvlink_summary
from .models import Host, HostHealth, StateSnapshot
from .scope import hosts_group_ids_prefetch, hosts_visible
from .state import DeploymentState, GpuState, HostState, Problem, problem_lines

# Statuses a decision can rest on (a partial one with an acknowledgement).
USABLE_STATUSES = {SnapshotStatus.OK, SnapshotStatus.PARTIAL}


@dataclass
class FleetRow:
    """A host's row on the fleet page. `key` digests every fact its template reads (see
    fleet_row_key); `summary` and `last_good` are filled by fleet_row_summarize, only for the
    rows that are rendered rather than found in the cache."""

    host: Host
    health: HostHealth | None
    snapshot: StateSnapshot | None
    integrity: StateSnapshot | None  # the newest that checked the engine's files
    last_good_snapshot: StateSnapshot | None  # for hosts that cannot be read now
    now: Any
    in_maintenance: bool = False
    key: str = ""
    summary: dict[str, Any] = dataclasses.field(default_factory=dict)
    last_good: dict[str, Any] | None = None
    summarized: bool = False

    @property
    def next_probe_at(self) -> Any:
        """When the host falls due (None: never probed, due now)."""
        if self.host.last_probe_at is None:
            return None
        return self.host.last_probe_at + dt.timedelta(seconds=self.host.probe_interval_seconds)


# The fleet page's sorts. In verdict order, worst first and hosts never judged before all,
# read from the index host_verdict_order rather than by sorting every host.
FLEET_ORDERS: dict[str, list[Any]] = {
    "name": ["name"],
    "age": [F("last_probe_at").asc(nulls_first=True), "name"],
    "verdict": [F("verdict_severity").desc(nulls_first=True), "name"],
}


def fleet_page(
    *,
    user: Any,
    verdict: str = "",
    q: str = "",
    group: str = "",
    sort: str = "verdict",
    page: str | None = None,
    maintenance: str = "",
) -> tuple[Page[Any], list[FleetRow], str]:
    """One page of the hosts `user` sees with each one's stored verdict and newest snapshot,
    in a fixed number of queries whatever the fleet's size, and a note when `page` was not a
    page of it. `group` keeps the hosts of one host group (by name).

    The snapshots are read without their state: a row found in the cache needs only their
    headers (fleet_row_key); fleet_rows_read_state reads the rest for the rows rendered."""
    matching = hosts_visible(user)
    if verdict:
        matching = matching.filter(verdict_severity=VERDICT_SEVERITY.get(verdict, -1))
    if q:
        matching = matching.filter(name__icontains=q)
    if maintenance:  # "yes": only hosts in maintenance now, "no": only the others
        in_maintenance = Q(maintenance_until__gt=timezone.now())
        matching = matching.filter(in_maintenance if maintenance == "yes" else ~in_maintenance)
    if group:
        matching = matching.filter(groups__name=group)
    order = FLEET_ORDERS.get(sort, FLEET_ORDERS["verdict"])
    # Sort and page the hosts' ids alone, then read the page's hosts whole: sorting every
    # host with all its columns and its health took twice as long (10,000 hosts, bench/).
    current, note = numbered_page(matching.order_by(*order).values_list("pk", flat=True), page)
    ids = list(current.object_list)
    found = (
        Host.objects.select_related("health")
        .annotate(
            newest_snapshot=newest_snapshot_id(),
            newest_integrity=newest_snapshot_id(includes_integrity=True),
        )
        .in_bulk(ids)
    )
    hosts = [found[pk] for pk in ids if pk in found]  # (one removed meanwhile is left out)
    hosts_group_ids_prefetch(hosts)  # each row's "Probe now" asks for the roles on its host
    now = timezone.now()
    wanted = set()
    for host in hosts:
        health = getattr(host, "health", None)
        wanted |= {
            host.newest_snapshot,  # type: ignore[attr-defined]
            host.newest_integrity,  # type: ignore[attr-defined]
            health.last_good_snapshot_id if health is not None else None,
        }
    snapshots = StateSnapshot.objects.defer("parsed", "raw_index").in_bulk(wanted - {None})
    rows = []
    for host in hosts:
        health = getattr(host, "health", None)
        rows.append(
            fleet_row(
                host,
                now,
                snapshots.get(host.newest_snapshot),  # type: ignore[attr-defined]
                integrity=snapshots.get(host.newest_integrity),  # type: ignore[attr-defined]
                last_good=snapshots.get(health.last_good_snapshot_id) if health else None,
                looked_up=True,
            )
        )
    return current, rows, note


# The parts of a snapshot's state a fleet row shows (service, model, GPUs, in flight, engine
# check, and the problems that say a GPU list is unknown). The fleet reads only these keys
# from the database: not the GPU details, topology and processes that the host page shows.
ROW_STATE_KEYS = ("gpus", "problems", "deployments")


def fleet_rows_read_state(rows: Iterable[FleetRow]) -> None:
    """Give the snapshots of `rows` that fleet_page read without their state the part of it a
    row shows (`row_state`, a HostState), in one query: at 50 rows a page, decoding whole
    snapshots was most of the page's cost."""
    snapshots = [
        snapshot
        for row in rows
        for snapshot in (row.snapshot, row.integrity, row.last_good_snapshot)
        if snapshot is not None and "parsed" in snapshot.get_deferred_fields()
    ]
    parts = {f"row_{key}": KeyTransform(key, "parsed") for key in ROW_STATE_KEYS}
    found = {
        pk: values
        for pk, *values in StateSnapshot.objects.filter(pk__in={s.pk for s in snapshots})
        .annotate(**parts)
        .values_list("pk", *parts)
    }
    for snapshot in snapshots:
        partial = dict(zip(ROW_STATE_KEYS, found.get(snapshot.pk, [None] * 3), strict=True))
        snapshot.row_state = HostState.from_json(partial)  # type: ignore[attr-defined]


def fleet_row(
    host: Host,
    now: Any = None,
    snapshot: StateSnapshot | None = None,
    *,
    integrity: StateSnapshot | None = None,
    last_good: StateSnapshot | None = None,
    looked_up: bool = False,
) -> FleetRow:
    """A host's row on the fleet page. Its newest snapshot, the newest that checked the
    engine's files, and its last good one are looked up here unless the caller did
    (`looked_up`: None means none; the caller's may be read without their state, then
    fleet_rows_read_state reads the part a row shows before fleet_row_summarize)."""
    now = now or timezone.now()
    health = getattr(host, "health", None)
    if not looked_up:
        snapshot = latest_snapshot(host)
        integrity = latest_integrity_snapshot(host)
    unreadable = snapshot is None or snapshot.status not in USABLE_STATUSES
    if unreadable and not looked_up and health is not None:
        last_good = health.last_good_snapshot
    row = FleetRow(
        host,
        health,
        snapshot,
        integrity if (snapshot is None or snapshot.pk != getattr(integrity, "pk", None)) else None,
        last_good if unreadable else None,
        now,
        in_maintenance=host.in_maintenance(now),
    )
    row.key = fleet_row_key(row)
    return row


def fleet_row_key(row: FleetRow) -> str:
    """A digest of every fact the fleet row's template reads: each column of the host and of
    its health, and which snapshots it shows (a snapshot's state does not change: its id, status
    and digest name it). A new snapshot, verdict, maintenance, host key or setting gives a new
    key; the clocks are not in it (the row leaves them as holes, hosts.templatetags.fleet_rows).
    Whether maintenance lasts now is: the one fact that changes with no write."""
    host, health = row.host, row.health
    facts = [
        tuple(getattr(host, f.attname) for f in Host._meta.concrete_fields),
        tuple(getattr(health, f.attname) for f in HostHealth._meta.concrete_fields)
        if health is not None
        else None,
        *(
            (s.pk, s.status, s.digest, s.taken_at) if s is not None else None
            for s in (row.snapshot, row.integrity, row.last_good_snapshot)
        ),
        row.in_maintenance,
        settings.SNAPSHOT_MAX_AGE_SECONDS,
        timezone.get_current_timezone_name(),  # the times in its tooltips
    ]
    return hashlib.blake2b(repr(facts).encode(), digest_size=20).hexdigest()


def fleet_row_summarize(row: FleetRow) -> FleetRow:
    """Fill the row's summary (and its last good snapshot's) from its snapshots' state."""
    if row.summarized:
        return row
    row.summary = _summary_of(row.snapshot, row.now)
    if row.last_good_snapshot is not None:
        row.last_good = _summary_of(row.last_good_snapshot, row.now)
        row.last_good["snapshot"] = row.last_good_snapshot
    if row.summary.get("integrity") is None and row.integrity is not None:
        # Engine files are checked on their own, slower schedule: show the newest check.
        row.summary["integrity"] = integrity_summary(_state_of(row.integrity))
        row.summary["integrity_taken_at"] = row.integrity.taken_at
    row.summarized = True
    return row


def _state_of(snapshot: StateSnapshot) -> HostState:
    """The row's part of the state when fleet_rows_read_state read it, else the whole state."""
    row_state: HostState | None = getattr(snapshot, "row_state", None)
    return row_state if row_state is not None else snapshot.state()


def _summary_of(snapshot: StateSnapshot | None, now: Any) -> dict[str, Any]:
    return snapshot_summary(snapshot, state=_state_of(snapshot) if snapshot else None, now=now)


@dataclass
class FleetCounts:
    verdicts: dict[str, int]  # by verdict, every one (hosts never judged count as unknown)
    in_maintenance: int  # now


def fleet_counts(*, user: Any) -> FleetCounts:
    """How many of the hosts `user` sees have each verdict, and how many are in maintenance
    now: the verdicts from the index host_verdict_order (hosts never judged count as
    unknown), the hosts in maintenance from host_maintenance_until."""
    visible = hosts_visible(user)
    by_severity: dict[int | None, int] = dict(
        visible.order_by().values_list("verdict_severity").annotate(Count("pk"))
    )
    verdicts = {v: by_severity.get(VERDICT_SEVERITY[v], 0) for v in Verdict.values}
    verdicts[Verdict.UNKNOWN] += by_severity.get(None, 0)
    in_maintenance = visible.filter(maintenance_until__gt=timezone.now()).count()
    return FleetCounts(verdicts=verdicts, in_maintenance=in_maintenance)


def newest_snapshot_id(**filters: Any) -> Subquery:
    """Annotate hosts with this to get each one's newest snapshot id (matching `filters`) in the
    same query."""
    return Subquery(
        StateSnapshot.objects.filter(host=OuterRef("pk"), **filters)
        .order_by("-taken_at", "-id")
        .values("id")[:1]
    )


def _newest(snapshots: QuerySet[StateSnapshot], limit: int) -> QuerySet[StateSnapshot]:
    """The newest `limit` of `snapshots`, newest first, found by id first: the ids come from
    an index-only scan of (host, taken_at, id), then only those rows are read. Asked for whole
    rows at once, PostgreSQL may instead walk every host's recent snapshots by time."""
    newest = snapshots.order_by("-taken_at", "-id").values("id")[:limit]
    return StateSnapshot.objects.filter(pk__in=Subquery(newest)).order_by("-taken_at", "-id")


def latest_snapshot(host: Host) -> StateSnapshot | None:
    return _newest(host.snapshots.all(), 1).first()


def latest_integrity_snapshot(host: Host) -> StateSnapshot | None:
    """The newest snapshot that checked the engine's installed files."""
    return _newest(host.snapshots.filter(includes_integrity=True), 1).first()


HISTORY_SHOWN = ("id", "host_id", "taken_at", "status", "trigger", "duration_ms", "digest")


def snapshot_history(host: Host, limit: int = 50) -> QuerySet[StateSnapshot]:
    """The newest snapshots as the host page lists them: their headers, not their contents."""
    return _newest(host.snapshots.all(), limit).only(*HISTORY_SHOWN)


def fragment_key(rows: Iterable[Any], shown: Iterable[str]) -> str:
    """A digest of the fields a page fragment shows of each of `rows` (and of the time zone
    its times are shown in): the key it is cached under ("fragments"), which changes with any
    of them. For rows that do not change once written (snapshots, audit events)."""
    names = tuple(shown)
    facts: list[Any] = [tuple(getattr(row, name) for name in names) for row in rows]
    facts.append(timezone.get_current_timezone_name())
    return hashlib.blake2b(repr(facts).encode(), digest_size=20).hexdigest()


def snapshot_summary(
    snapshot: StateSnapshot | None, *, state: HostState | None = None, now: Any = None
) -> dict[str, Any]:
    """The handful of facts a dashboard row or a change form shows (from `state` when the
    caller read the snapshot's state, or the part of it this needs: fleet_rows_read_state)."""
    if snapshot is None:
        return {
            "service": "never probed", "model": "", "gpus": [], "inflight": None, "age": None,
            "usable": False, "gpus_unknown": True,
        }  # fmt: skip
    state = state if state is not None else snapshot.state()
    unit = sorted(state.deployments)[0] if state.deployments else ""
    unit_state = state.unit_state(unit)
    server = state.server(unit)
    gpus = [gpu_row(gpu) for gpu in state.gpus]
    service = unit_state.active_state or ("no deployment" if not unit else "unknown")
    if unit_state.sub_state and unit_state.active_state:
        service = f"{unit_state.active_state} ({unit_state.sub_state})"
    age = snapshot.age_seconds(now or timezone.now())
    return {
        "unit": unit,
        "service": service,
        "active_state": unit_state.active_state,
        "active_since": unit_state.active_enter_timestamp,
        "main_pid": unit_state.main_pid,
        "healthy": server.healthy if unit else None,
        "model": ", ".join(server.models),
        "model_root": ", ".join(server.model_roots),
        "gpus": gpus,
        "memory": gpu_memory_total(state.gpus),
        "power_w": round(sum(g.power_draw_w or 0 for g in state.gpus), 1) if gpus else None,
        "utilization_pct": (
            round(sum(g.utilization_pct or 0 for g in state.gpus) / len(gpus)) if gpus else None
        ),
        "inflight": state.inflight(unit) if unit else None,
        "age": age,
        "usable": snapshot.status in USABLE_STATUSES,
        # No GPU list because nvidia-smi failed or the host did not answer, not because it has none.
        "gpus_unknown": snapshot.status not in USABLE_STATUSES
        or any(p.section == "gpus" for p in state.problems),
        "stale": age > settings.SNAPSHOT_MAX_AGE_SECONDS,
        "integrity": integrity_summary(state),
    }


_GPU_FIELDS = tuple(f.name for f in fields(GpuState))


def gpu_row(gpu: GpuState) -> dict[str, Any]:
    """One GPU's readings as pages show them, with its share of memory used and the text of
    its bar's tooltip. Built here rather than in the template: at 50 hosts of 8 GPUs a page,
    the template's per-number formatting was a good part of the fleet page's time."""
    used, total = gpu.memory_used_mib, gpu.memory_total_mib
    row = {name: getattr(gpu, name) for name in _GPU_FIELDS}
    row["memory_pct"] = round(100 * used / total) if used is not None and total else None
    row["bar_title"] = (
        f"GPU {_shown(gpu.index)}: {_shown(used)} / {_shown(total)} MiB, "
        f"{_shown(gpu.power_draw_w)} W, {_shown(gpu.utilization_pct)} %"
    )
    return row


def gpu_memory_total(gpus: list[GpuState]) -> str:
    """All the GPUs' memory used of their total, in GiB ("704 / 783 GiB"), or "" when no GPU
    says both: the line under the per-GPU bars."""
    known = [g for g in gpus if g.memory_used_mib is not None and g.memory_total_mib]
    if not known:
        return ""
    used = sum(g.memory_used_mib or 0 for g in known) / 1024
    total = sum(g.memory_total_mib or 0 for g in known) / 1024
    return f"{used:,.0f} / {total:,.0f} GiB"


def _shown(value: Any) -> str:
    """A reading as the template would print it (`|default_if_none:"?"`)."""
    if value is None:
        return "?"
    if isinstance(value, float) and "e" in str(value):
        return str(formats.localize(value))  # 1e-05 is printed 0.00001
    return str(value)


def integrity_summary(state: HostState) -> dict[str, Any] | None:
    """The engine check of the host's first unit, as the fleet row and the change form show it
    (None when this snapshot did not check the engine's files)."""
    unit = sorted(state.deployments)[0] if state.deployments else ""
    integrity = state.deployments[unit].integrity if unit else None
    return asdict(integrity) if integrity is not None else None


def snapshot_as_dict(snapshot: StateSnapshot) -> dict[str, Any]:
    return {
        "id": snapshot.pk,
        "host": snapshot.host.name,
        "taken_at": snapshot.taken_at.isoformat(),
        "age_seconds": round(snapshot.age_seconds(), 3),
        "status": snapshot.status,
        "trigger": snapshot.trigger,
        "duration_ms": snapshot.duration_ms,
        "digest": snapshot.digest,
        "error": redact_text(snapshot.error),
        "material_fingerprint": snapshot.material_fingerprint(),
        # Stored redacted; shown through today's redaction too (older snapshots hid less).
        "parsed": redact_data(snapshot.parsed),
    }


def snapshot_raw(snapshot: StateSnapshot) -> dict[str, Any]:
    """Each probe section's output and exit status as pages and the API show them: through
    controlplane.redaction, whatever the probe that stored it redacted."""
    return {
        name: {**section, "output": redact_text(str(section.get("output", "")))}
        for name, section in snapshot.raw.items()
    }


def snapshot_shown(snapshot: StateSnapshot) -> dict[str, Any]:
    """A snapshot's host text for its page: the error, the parsed state and the raw sections,
    each through controlplane.redaction."""
    return {
        "error": redact_text(snapshot.error),
        "parsed": redact_data(snapshot.parsed),
        "sections": sorted(snapshot_raw(snapshot).items()),
    }


def snapshot_shown_error(snapshot: StateSnapshot | None) -> str:
    """What the probe could not read, as the host page shows it (through redaction): for a
    partial snapshot, each distinct error once with the sections it hit."""
    if snapshot is None:
        return ""
    problems = snapshot.state().problems if snapshot.status == SnapshotStatus.PARTIAL else []
    if problems:
        return redact_text("; ".join(problem_lines(problems)))
    return redact_text(snapshot.error)


def _shown_deployment(dep: DeploymentState) -> DeploymentState:
    """A deployment's host text (unit files, environment values, journal) through
    controlplane.redaction, for a page; the snapshot's own state is left as it is."""
    journal = dep.journal
    if journal:
        journal = redact_text("\n".join(journal)).split("\n")
    return dataclasses.replace(
        dep,
        unit_files=[dataclasses.replace(f, text=redact_text(f.text)) for f in dep.unit_files],
        environment_files=[
            dataclasses.replace(
                e,
                variables={
                    k: REDACTED if is_secret_name(k) else redact_text(v)
                    for k, v in e.variables.items()
                },
            )
            for e in dep.environment_files
        ],
        journal=journal,
    )


def host_parity(snapshot: StateSnapshot | None) -> dict[str, Any]:
    """What `systemctl status`, `journalctl` and `nvidia-smi` would show, from one snapshot:
    each unit's status, files and journal; each GPU's details beside its readings; who owns
    each GPU process; and how the GPUs reach each other."""
    if snapshot is None:
        return {}
    state = snapshot.state()
    details = {d.index: d for d in state.gpu_details}
    by_uuid = state.gpu_index_by_uuid()
    faults = gpu_fault_notes(state)
    listed = {gpu.index for gpu in state.gpus}
    return {
        "units": [
            {"name": unit, "dep": _shown_deployment(dep), "status": dep.unit}
            for unit, dep in state.deployments.items()
        ],
        "gpus": [(gpu, details.get(gpu.index), faults.get(gpu.index, [])) for gpu in state.gpus],
        # Faults of GPUs nvidia-smi did not list (lost ones), or of no GPU it could name.
        "other_gpu_faults": [
            (index, notes) for index, notes in faults.items() if index not in listed
        ],
        "nvlink_summary": nvlink_summary(state),
        "processes": [(app, by_uuid.get(app.gpu_uuid or "")) for app in state.compute_apps],
        "topology": state.topology,
        "driver_version": state.driver_version
        or next((d.driver_version for d in state.gpu_details if d.driver_version), None),
        "cuda_version": state.cuda_version,
        "problems": [Problem(p.section, redact_text(p.message)) for p in state.problems],
        # Seconds the host's clock is ahead of the control plane's (negative: behind), as seen
        # by this probe: systemd's timestamps are on the host's clock.
        "clock_skew": (
            round(state.host_time - snapshot.taken_at.timestamp())
            if state.host_time is not None
            else None
        ),
    }


def gpu_diagnostic_shown(host: Host) -> dict[str, Any] | None:
    """DCGM's newest diagnostic of `host` for its page: the snapshot and the result."""
    snapshot = host.gpu_diagnostic_snapshot
    if snapshot is None:
        return None
    return {"snapshot": snapshot, "result": snapshot.state().gpu_diagnostic}
