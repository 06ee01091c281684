"""Index builds on a live database of fleet size: plain CREATE INDEX against CONCURRENTLY.

Loads a scratch database with --hosts hosts, --snapshots-per-host snapshots each (the parsed
state the tests use, about 5 KB a row as stored) and --events audit events. Then, for every
index the product's migrations build on a fleet-size table (controlplane.migration_ops), --runs
times and alternating: drop the index, and build it again, plainly (as those migrations did)
or CONCURRENTLY (as they do now), while a writer appends to that table every --every-ms ms the
way a probe round does (a snapshot) or an audit append does (an event through record_many).
It prints each build's wall time and how long the writer's appends waited meanwhile.

  .venv/bin/python bench/migrations_online.py              # loads the database
  .venv/bin/python bench/migrations_online.py --reuse      # measures it again
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import threading
import time

import scaffold

DB_NAME = "controlplane_bench_migrations"


def load(hosts: int, per_host: int, events: int) -> None:
    from django.utils import timezone

    from controlplane.audit import services as audit
    from controlplane.audit.context import acting
    from hosts.choices import HostKeyStatus
    from hosts.models import Host, StateSnapshot
    from hosts.state import snapshot_digest
    from tests import factories as f

    now = timezone.now()
    credential = f.make_host("seed-host").credential
    parsed = f.parsed_state()
    digest = snapshot_digest(parsed)
    for start in range(0, hosts, 1000):
        batch = Host.objects.bulk_create(
            Host(name=f"gpu-{i:05d}", address="127.0.0.1", port=2201, credential=credential,
                 host_key=f.HOST_KEY, host_key_status=HostKeyStatus.PINNED, last_probe_at=now)
            for i in range(start + 1, min(start + 1001, hosts + 1))
        )  # fmt: skip
        StateSnapshot.objects.bulk_create(
            (
                scaffold.ok_snapshot(h, now - dt.timedelta(minutes=k), duration_ms=60,
                                     parsed=parsed, digest=digest)
                for h in batch
                for k in range(per_host)
            ),
            batch_size=2000,
        )  # fmt: skip
    print(f"loaded {hosts} hosts with {hosts * per_host} snapshots", flush=True)
    snap = StateSnapshot.objects.order_by("id").first()
    host = snap.host if snap else None
    with acting("system:beat"):
        for start in range(0, events, 1000):
            audit.record_many([
                {"action": "probe.completed", "target": snap, "host": host, "snapshot": snap,
                 "data": {"status": "ok", "trigger": "schedule"}}
                for _ in range(start, min(start + 1000, events))
            ])  # fmt: skip
    print(f"loaded {events} audit events", flush=True)


def fleet_indexes() -> list[tuple[str, str, object]]:
    """(migration, model name, index) of each concurrent index build in the migrations."""
    from django.db.migrations.loader import MigrationLoader

    from controlplane.migration_ops import AddIndexConcurrently

    found = []
    loader = MigrationLoader(None, ignore_no_migrations=True)
    for (app, name), migration in sorted(loader.disk_migrations.items()):
        for op in migration.operations:
            if isinstance(op, AddIndexConcurrently):
                found.append((f"{app}.{name}", f"{app}.{op.model_name}", op.index))
    return found


class Writer(threading.Thread):
    """Appends one row to `model`'s table every `every` seconds, timing each append."""

    def __init__(self, label: str, every: float) -> None:
        super().__init__(daemon=True)
        self.label, self.every = label, every
        self.waits: list[float] = []
        self.go = threading.Event()
        self.halt = threading.Event()

    def append(self) -> None:
        from django.utils import timezone

        from controlplane.audit import services as audit
        from controlplane.audit.context import acting
        from hosts.models import StateSnapshot

        snap = StateSnapshot.objects.order_by("id").first()
        assert snap is not None
        if self.label == "hosts.statesnapshot":
            StateSnapshot.objects.bulk_create([
                scaffold.ok_snapshot(snap.host, timezone.now(), duration_ms=60,
                                     parsed=snap.parsed, digest=snap.digest)
            ])  # fmt: skip
        else:
            with acting("system:beat"):
                audit.record_many([
                    {"action": "probe.completed", "target": snap, "host": snap.host,
                     "snapshot": snap, "data": {"status": "ok", "trigger": "schedule"}}
                ])  # fmt: skip

    def run(self) -> None:
        from django.db import connection

        try:
            while not self.halt.is_set():
                started = time.perf_counter()
                self.append()
                if self.go.is_set():
                    self.waits.append(time.perf_counter() - started)
                time.sleep(self.every)
        finally:
            connection.close()


def build_once(model_label: str, index: object, *, concurrently: bool, every: float) -> dict:
    from django.apps import apps
    from django.db import connection

    model = apps.get_model(model_label)
    with connection.schema_editor(atomic=False) as editor:
        editor.remove_index(model, index, concurrently=True)
    writer = Writer(model_label, every)
    writer.start()
    time.sleep(1.0)  # the writer's first appends warm its connection
    writer.go.set()
    started = time.perf_counter()
    with connection.schema_editor(atomic=False) as editor:
        editor.add_index(model, index, concurrently=concurrently)
    seconds = time.perf_counter() - started
    time.sleep(every * 2)  # an append queued behind the build's lock finishes
    writer.halt.set()
    writer.join()
    waits = writer.waits or [0.0]
    return {"seconds": seconds, "appends": len(waits), "max_wait": max(waits),
            "median_wait": statistics.median(waits)}  # fmt: skip


def table_rows(model_label: str) -> int:
    from django.apps import apps

    return apps.get_model(model_label).objects.count()


def main() -> None:
    parser = scaffold.parser_for(__doc__)
    parser.add_argument("--database", default=scaffold.DEFAULT_DATABASE)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--snapshots-per-host", type=int, default=10)
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--every-ms", type=float, default=20)
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()

    import psycopg

    db_url = scaffold.fresh_database(args.database, DB_NAME, reuse=args.reuse)
    started = time.perf_counter()
    scaffold.migrate_in_child(dict(os.environ, DATABASE_URL=db_url))
    print(f"migrated an empty database in {time.perf_counter() - started:.1f} s", flush=True)
    scaffold.django_setup(db_url)
    if not args.reuse:
        load(args.hosts, args.snapshots_per_host, args.events)
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
    print(f"load average {scaffold.loadavg()}; each figure the median of {args.runs} builds, "
          f"plain and concurrent alternating; an append every {args.every_ms:g} ms")  # fmt: skip
    header = (f"{'migration':42} {'index':28} {'rows':>8}  {'plain: build':>12} {'max wait':>9}"
              f"  {'concurrently: build':>19} {'max wait':>9}")  # fmt: skip
    print(header)
    every = args.every_ms / 1000
    for migration, model_label, index in fleet_indexes():
        runs: dict[bool, list[dict]] = {False: [], True: []}
        for _ in range(args.runs):
            for concurrently in (False, True):
                runs[concurrently].append(
                    build_once(model_label, index, concurrently=concurrently, every=every)
                )

        def med(concurrently: bool, key: str, runs: dict = runs) -> float:
            return statistics.median(r[key] for r in runs[concurrently])

        print(f"{migration:42} {index.name:28} {table_rows(model_label):>8}  "
              f"{med(False, 'seconds'):>10.2f} s {med(False, 'max_wait') * 1000:>6.0f} ms"
              f"  {med(True, 'seconds'):>17.2f} s {med(True, 'max_wait') * 1000:>6.0f} ms",
              flush=True)  # fmt: skip
    print(f"load average {scaffold.loadavg()}")


if __name__ == "__main__":
    main()
