"""What one probe of a host asks for: its servers, and what the host's last snapshot says is
worth reading this time (environment files, a failing unit's journal)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable

from django.db.models import OuterRef, Subquery

from .. import commands
from ..choices import SnapshotStatus
from ..models import Host, StateSnapshot
from ..parsers import named_environment_files
from ..state import DeploymentState, HostState

# A unit seen failing (or restarting after failures) gets this many journal lines in the next
# probe, so the snapshot shows why without anyone opening a shell.
JOURNAL_PROBE_LINES = 50
READABLE = (SnapshotStatus.OK, SnapshotStatus.PARTIAL)  # the snapshots that reached the host


class SeenStates:
    """The deployments of the snapshots this process stored last, by host: the next probe
    round's spec reads them from here when that snapshot is still the host's newest readable
    one (same id and digest, so the same state), instead of reading its JSON back. At most
    `max_hosts`; when full, a host not yet kept is not kept (as the section memos).
    Thread-safe."""

    def __init__(self, max_hosts: int) -> None:
        self.max_hosts = max_hosts
        self._seen: dict[int, tuple[tuple[int, str], HostState]] = {}
        self._lock = threading.Lock()

    def keep(self, snapshots: Iterable[StateSnapshot]) -> None:
        """Snapshots just stored with the state their probe parsed (StateSnapshot.state_known)."""
        held = [(s, s.state_in_hand()) for s in snapshots if s.status in READABLE]
        kept = [
            (s.host_id, ((s.pk, s.digest), HostState(deployments=state.deployments)))
            for s, state in held
            if state is not None
        ]
        with self._lock:
            for host_id, entry in kept:
                if host_id in self._seen or len(self._seen) < self.max_hosts:
                    self._seen[host_id] = entry

    def get(self, host_id: int, snapshot: tuple[int, str]) -> HostState | None:
        """The state kept for `host_id` if it is that of `snapshot` (id, digest)."""
        with self._lock:
            found = self._seen.get(host_id)
        return found[1] if found is not None and found[0] == snapshot else None


# A host's state is a few KB of deployments: 10,000 of them are tens of MB at most.
seen_states = SeenStates(max_hosts=10_000)


def last_seen_states_prefetch(hosts: list[Host]) -> None:
    """`last_seen_state` for many hosts in at most two queries (a probe round), kept on each
    host: their newest readable snapshots' ids, then the states this process does not hold.

    Only the deployments part of each state is read: it is all a probe spec looks at.
    """
    newest = StateSnapshot.objects.filter(host=OuterRef("pk"), status__in=READABLE).order_by(
        "-taken_at", "-id"
    )
    seen = Host.objects.filter(pk__in=[h.pk for h in hosts]).annotate(
        seen=Subquery(newest.values("id")[:1]), seen_digest=Subquery(newest.values("digest")[:1])
    )
    states: dict[int, HostState] = {}
    unknown = []
    for host_id, snapshot_id, digest in seen.values_list("pk", "seen", "seen_digest"):
        if snapshot_id is None:
            continue
        held = seen_states.get(host_id, (snapshot_id, digest))
        if held is not None:
            states[host_id] = held
        else:
            unknown.append(snapshot_id)
    if unknown:
        rows = StateSnapshot.objects.filter(pk__in=unknown)
        for host_id, deployments in rows.values_list("host_id", "parsed__deployments"):
            states[host_id] = HostState.from_json({"deployments": deployments or {}})
    for host in hosts:
        host._last_seen_state = states.get(host.pk)  # type: ignore[attr-defined]


def last_seen_state(host: Host) -> HostState | None:
    """The state of the host's newest snapshot that reached it (ok or partial)."""
    if hasattr(host, "_last_seen_state"):  # last_seen_states_prefetch
        return host._last_seen_state  # type: ignore[no-any-return]
    parsed = (
        host.snapshots.filter(status__in=READABLE)
        .order_by("-taken_at", "-id")
        .values_list("parsed", flat=True)
        .first()
    )
    return HostState.from_json(parsed) if parsed is not None else None


def environment_paths(dep: DeploymentState | None) -> tuple[str, ...]:
    """The environment files the unit named last time, as paths a command may carry.

    A path outside the safe pattern is left out (sending it would refuse the whole probe);
    the parser then reports it as named but not read, so the gap shows instead of hiding.
    """
    if dep is None:
        return ()
    paths = []
    for path in named_environment_files(dep.unit, dep.unit_files):
        try:
            paths.append(commands.check_path(path))
        except commands.UnsafeCommand:
            continue
    return tuple(paths[: commands.MAX_ENVIRONMENT_FILES])


def journal_lines(dep: DeploymentState | None) -> int:
    """JOURNAL_PROBE_LINES for a unit last seen failed, or activating after restarts."""
    if dep is None:
        return 0
    unit = dep.unit
    failing = unit.active_state == "failed" or (
        unit.active_state == "activating" and (unit.n_restarts or 0) > 0
    )
    return JOURNAL_PROBE_LINES if failing else 0


def server_specs(host: Host) -> tuple[commands.ServerSpec, ...]:
    """One ServerSpec per deployment on the host, informed by its last snapshot."""
    deployments = list(host.deployments.all())
    last = last_seen_state(host) if deployments else None
    specs = []
    for d in deployments:
        dep = last.deployments.get(d.unit) if last is not None else None
        specs.append(
            commands.ServerSpec(
                unit=d.unit,
                port=d.port,
                engine_python=d.engine_python,
                engine_dist=d.engine_dist,
                environment_files=environment_paths(dep),
                journal_lines=journal_lines(dep),
            )
        )
    return tuple(specs)


def spec_with_named_files(
    spec: commands.ProbeSpec, parsed: dict[str, object]
) -> commands.ProbeSpec | None:
    """`spec` again, reading the environment files the units turned out to name; None when it
    read them all already. A unit's files are only known once `systemctl cat` has answered, so
    the first probe of a host (or of a unit that just gained a file) asks twice."""
    # the deployments alone, as last_seen_states_prefetch reads them: every probe of a round
    # comes through here, and reading its GPUs back as well cost more than the rest
    state = HostState.from_json({"deployments": parsed.get("deployments") or {}})
    servers, grew = [], False
    for server in spec.servers:
        named = environment_paths(state.deployments.get(server.unit))
        if set(named) - set(server.environment_files):
            grew = True
            server = dataclasses.replace(server, environment_files=named)
        servers.append(server)
    return dataclasses.replace(spec, servers=tuple(servers)) if grew else None
