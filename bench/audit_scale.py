"""The audit log at a million events: history page server time, export and verification speed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/controlplane \
        .venv/bin/python bench/audit_scale.py

Uses its own database next to DATABASE_URL's (default `controlplane_bench`, dropped and
created again unless --reuse), migrates it, bulk-loads --events hash-chained events with COPY
(hashes computed here, exactly as `record` computes them), signs a checkpoint, then measures:

- the history page as a signed-in viewer sees it, through Django's test client (middleware,
  session, query, template): first page, deep pages by keyset cursor, filtered pages, the event
  page and a host's timeline; the median of --runs runs after one warm-up;
- streaming export throughput (CSV and JSON Lines of every event);
- verification throughput (`chain_verify`, as `manage.py verify_audit` runs it).

Aims: every page under 100 ms, verification at least 100,000 events/s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import scaffold
from scaffold import median_ms

HOSTS = 200
USERS = ["alice", "bob", "carol", "dmitri", "erin", "farah", "gwen", "hiro", "ines", "jon"]
PAGE_AIM_MS = 100.0
VERIFY_AIM = 100_000


# --- synthetic history ---------------------------------------------------------------------


def _events(count: int, seed: int) -> Iterator[dict[str, Any]]:
    """A plausible fleet's log: mostly scheduled probes, sign-ins, and change requests whose
    events share a correlation id (request, approval, steps, outcome)."""
    rng = random.Random(seed)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    step = dt.timedelta(days=90) / count
    snapshot_id = 0
    change_id = 0
    story: list[dict[str, Any]] = []
    for n in range(count):
        when = start + step * n
        if story:
            yield {**story.pop(0), "created_at": when}
            continue
        host = rng.randrange(1, HOSTS + 1)
        hostname = f"gpu-{host:03d}"
        roll = rng.random()
        if roll < 0.72:
            snapshot_id += 1
            yield {
                "created_at": when,
                "actor": "system:beat",
                "action": "probe.completed",
                "target_type": "hosts.statesnapshot",
                "target_id": str(snapshot_id),
                "target_label": f"{hostname} @ {when:%Y-%m-%d %H:%M:%S} (ok)",
                "host_id": host,
                "host_label": hostname,
                "snapshot_id": snapshot_id,
                "snapshot_digest": f"{rng.getrandbits(256):064x}",
                "snapshot_age_seconds": 0.0,
                "correlation_id": f"{rng.getrandbits(128):032x}",
                "data": {
                    "status": "ok" if rng.random() > 0.02 else "unreachable",
                    "trigger": "schedule",
                    "duration_ms": rng.randint(300, 4000),
                },
            }
        elif roll < 0.80:
            user = rng.choice(USERS)
            yield {
                "created_at": when,
                "actor": user,
                "actor_user_id": USERS.index(user) + 100,
                "action": "auth.login",
                "target_type": "auth.user",
                "target_id": str(USERS.index(user) + 100),
                "target_label": user,
                "correlation_id": f"{rng.getrandbits(128):032x}",
                "ip": f"10.20.{rng.randrange(256)}.{rng.randrange(1, 255)}",
                "user_agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0",
            }
        elif roll < 0.84:
            user = rng.choice(USERS)
            port = rng.choice([8000, 8001, 30000])
            yield {
                "created_at": when,
                "actor": user,
                "actor_user_id": USERS.index(user) + 100,
                "action": "deployment.changed",
                "target_type": "deployments.deployment",
                "target_id": str(host),
                "target_label": f"vllm-kimi-k25.service on {hostname}",
                "host_id": host,
                "host_label": hostname,
                "correlation_id": f"{rng.getrandbits(128):032x}",
                "ip": "10.20.0.5",
                "user_agent": "Mozilla/5.0",
                "data": {
                    "fields": ["max_model_len", "port"],
                    "before": {"max_model_len": 262144, "port": port},
                    "after": {"max_model_len": 131072, "port": port + 1},
                },
            }
        else:
            change_id += 1
            snapshot_id += 1
            user = rng.choice(USERS)
            approver = rng.choice([u for u in USERS if u != user])
            corr = f"{rng.getrandbits(128):032x}"
            digest = f"{rng.getrandbits(256):064x}"
            base = {
                "target_type": "deployments.changerequest",
                "target_id": str(change_id),
                "target_label": f"model_swap #{change_id} on {hostname}",
                "host_id": host,
                "host_label": hostname,
                "correlation_id": corr,
                "snapshot_id": snapshot_id,
                "snapshot_digest": digest,
            }
            steps = [
                (user, "change.requested", {"kind": "model_swap", "reason": "NVFP4 build"}),
                (approver, "change.approved", {"expires_in_seconds": 1800}),
                ("system:worker", "step.preflight", {"drift": []}),
                ("system:worker", "step.restart", {"exit_status": 0, "duration_ms": 2100}),
                ("system:worker", "step.verify", {"healthy": True, "coherent": True}),
                ("system:worker", "change.succeeded", {"revision": 2}),
            ]
            for i, (actor, action, data) in enumerate(steps):
                event = {
                    **base,
                    "actor": actor,
                    "action": action,
                    "snapshot_age_seconds": round(12.0 + i * 31.5, 3),
                    "data": data,
                }
                if i == 0:
                    yield {**event, "created_at": when}
                else:
                    story.append(event)


def load(count: int, seed: int) -> float:
    """COPY `count` chained events into the (empty) log; returns the seconds it took."""
    from django.db import connection

    from controlplane.audit.chain import GENESIS_HASH, ROW_COLUMNS, canonical_json, row_hash

    columns = [c for c in ROW_COLUMNS]
    defaults = {
        "actor_user_id": None,
        "target_type": "",
        "target_id": "",
        "target_label": "",
        "host_id": None,
        "host_label": "",
        "snapshot_id": None,
        "snapshot_digest": "",
        "snapshot_age_seconds": None,
        "correlation_id": "",
        "data": {},
        "ip": None,
        "user_agent": "",
    }
    started = time.perf_counter()
    prev = GENESIS_HASH
    seq = 0
    with connection.cursor() as cursor:
        raw = cursor.cursor
        with raw.copy(f"COPY audit_auditevent ({', '.join(columns)}) FROM STDIN") as copy:
            for event in _events(count, seed):
                seq += 1
                fields = {**defaults, **event, "seq": seq, "prev_hash": prev}
                fields["created_at"] = fields["created_at"].isoformat()
                fields["data"] = canonical_json(fields["data"])
                fields["hash"] = ""
                row = tuple(fields[c] for c in columns)
                prev = row_hash(row)
                copy.write_row((*row[:-1], prev))
                if seq % 200_000 == 0:
                    print(f"  loaded {seq:,} events", flush=True)
        cursor.execute(
            "UPDATE audit_auditchainhead SET seq = %s, hash = %s WHERE id = 1", [seq, prev]
        )
        cursor.execute("ANALYZE audit_auditevent")
    return time.perf_counter() - started


# --- measuring -----------------------------------------------------------------------------


def page(client: Any, url: str) -> Callable[[], None]:
    def get() -> None:
        response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}")
        if b'id="audit-table"' not in response.content and b"<table" not in response.content:
            raise SystemExit(f"{url} rendered no table")

    return get


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--db-name", default="controlplane_bench")
    parser.add_argument("--runs", type=int, default=9, help="runs per page (median reported)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--reuse", action="store_true", help="measure an already loaded benchmark database"
    )
    args = parser.parse_args()

    base = os.environ.get("DATABASE_URL")
    if not base:
        raise SystemExit("set DATABASE_URL (PostgreSQL); the benchmark uses its own database")
    url = scaffold.fresh_database(base, args.db_name, reuse=args.reuse)
    checkpoint_dir = Path(tempfile.mkdtemp(prefix="audit-bench-checkpoints-"))
    os.environ["AUDIT_CHECKPOINT_DIR"] = str(checkpoint_dir)
    os.environ["DEBUG"] = "false"
    scaffold.django_setup(url)
    from django.db import connection

    from controlplane.accounts.roles import VIEWER
    from controlplane.audit import services
    from controlplane.audit.models import AuditEvent
    from controlplane.audit.verification import chain_verify
    from hosts.models import Host

    scaffold.migrate()
    if not args.reuse:
        # The fleet the events talk about (bulk_create: rows only, no audit events of its own).
        Host.objects.bulk_create(
            Host(id=n, name=f"gpu-{n:03d}", address=f"10.0.{n // 250}.{n % 250 + 1}")
            for n in range(1, HOSTS + 1)
        )
        print(f"Loading {args.events:,} events into {args.db_name} ...", flush=True)
        seconds = load(args.events, args.seed)
        print(f"  {args.events:,} events in {seconds:.1f} s ({args.events / seconds:,.0f}/s)")
    user = scaffold.bench_user("bench-viewer", VIEWER)
    services.checkpoint_write()
    head = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
    middle = AuditEvent.objects.filter(seq__gte=head // 2, action="change.approved").first()
    assert middle is not None

    client = scaffold.signed_in_client(user)
    since = "2026-02-10T00:00"
    until = "2026-02-11T00:00"
    pages = [
        ("first page", "/audit/"),
        ("deep page (middle, ?before=)", f"/audit/?before={head // 2}"),
        ("deep page (oldest, ?before=)", "/audit/?before=60"),
        ("newer page (?after=)", f"/audit/?after={head // 3}"),
        ("filtered: action", "/audit/?action=deployment.changed"),
        ("filtered: action, deep", f"/audit/?action=deployment.changed&before={head // 2}"),
        ("filtered: action prefix", "/audit/?action=change."),
        ("filtered: host", "/audit/?host=gpu-042"),
        ("filtered: actor", "/audit/?actor=carol"),
        ("filtered: host + action", "/audit/?host=gpu-042&action=change.succeeded"),
        ("filtered: one day", f"/audit/?since={since}&until={until}"),
        ("filtered: correlation id", f"/audit/?correlation={middle.correlation_id}"),
        ("filtered: free text (common)", "/audit/?text=NVFP4"),
        ("filtered: free text, one day", f"/audit/?text=gpu-042&since={since}&until={until}"),
        ("event page with its story", f"/audit/events/{middle.seq}/"),
        ("host timeline partial", "/audit/hosts/42/timeline/"),
    ]
    print(f"\nHistory pages over {head:,} events (median of {args.runs}, server time):")
    results: list[tuple[str, float]] = []
    for label, path in pages:
        ms = median_ms(page(client, path), args.runs)
        results.append((label, ms))
        flag = "" if ms < PAGE_AIM_MS else "  <-- over 100 ms"
        print(f"  {label:32s} {ms:8.1f} ms   {path}{flag}")

    print("\nStreaming export of every event:")
    for kind in ("jsonl", "csv"):
        t = time.perf_counter()
        response = client.get(f"/audit/export.{kind}")
        size = 0
        lines = 0
        for chunk in response.streaming_content:
            size += len(chunk)
            lines += chunk.count(b"\n") if isinstance(chunk, bytes) else 1
        seconds = time.perf_counter() - t
        rows = lines - (1 if kind == "csv" else 0)
        print(f"  {kind:5s} {rows:,} events, {size / 1e6:,.0f} MB in {seconds:.1f} s: "
              f"{rows / seconds:,.0f} events/s")  # fmt: skip

    print("\nVerification (chain_verify, what verify_audit runs):")
    for label, workers in (("default (parallel)", None), ("one process", 1)):
        speeds = []
        for _ in range(3):
            result = chain_verify(workers=workers)
            if not result.ok:
                raise SystemExit(f"verification failed: {result.summary()}")
            speeds.append(result.events_per_second)
        print(f"  {label:20s} {result.events:,} events: median {statistics.median(speeds):,.0f} "
              f"events/s (runs: {', '.join(f'{s:,.0f}' for s in speeds)})")  # fmt: skip

    # Free text over the whole log has no index: a rare word scans every event. Measured once,
    # for the record, and not part of the page aim (combine it with a time range or a filter).
    rare = "/audit/?text=no-such-word-anywhere"
    t = time.perf_counter()
    page(client, rare)()
    print(
        f"\n  (unindexed) free text, no match: {(time.perf_counter() - t) * 1000:,.0f} ms   {rare}"
    )

    over = [label for label, ms in results if ms >= PAGE_AIM_MS]
    print(
        f"\nMachine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, PostgreSQL {connection.pg_version // 10000}"
    )
    print("Pages over 100 ms: " + (", ".join(over) if over else "none"))


if __name__ == "__main__":
    main()
