#!/usr/bin/env python
"""The pages people keep open, at fleet size, under 50 concurrent users.

    .venv/bin/python bench/pages_scale.py --database postgres://postgres@127.0.0.1:5432/controlplane
    # options: --hosts 10000 --history 50000 --approvals 1000 --events 300000 --users 50
    #          --seconds 30 --think 1.0 --reuse (measure an already loaded database again)

Loads a fresh PostgreSQL database (`controlplane_pages_bench`): `--hosts` hosts, each with a
verdict and a snapshot; one of them (`gpu-00001`) with `--history` snapshots a minute apart and
their GPU samples; `--approvals` model swaps waiting for approval, each on a host of its own;
`--events` audit events through the real chain. Then serves the product with gunicorn
(`--server-workers` sync workers, as the Dockerfile runs it) and sends each page's requests from
`--users` simulated users at once, each signed in, waiting `--think` seconds between its
requests. While the audit history is measured, a "probe storm" appends 500 audit events a
second through `record_many`.

Server time is gunicorn's own (`%(D)s` in its access log: from reading the request to the
last byte written); the client's time on loopback is printed beside it. Each page's
queries are counted once with Django's test client.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import scaffold
from scaffold import loadavg, pct

STATE = scaffold.ROOT / ".run" / "bench-pages"
DB_NAME = "controlplane_pages_bench"
BIG = "gpu-00001"


def load(args: argparse.Namespace) -> None:
    from django.utils import timezone

    from controlplane.audit import services as audit
    from controlplane.audit.context import acting
    from deployments.choices import ChangeStatus
    from deployments.models import ChangeRequest, Deployment
    from hosts.choices import VERDICT_SEVERITY as severity
    from hosts.choices import HostKeyStatus
    from hosts.models import GpuSample, Host, HostHealth, StateSnapshot
    from hosts.state import snapshot_digest
    from tests import factories as f

    now = timezone.now()
    credential = f.make_host("seed-host").credential
    verdicts = ["healthy"] * 90 + ["degraded"] * 6 + ["failed"] * 2 + ["unknown"] * 2
    parsed = f.parsed_state()
    digest = snapshot_digest(parsed)
    hosts = []
    for start in range(0, args.hosts, 2000):
        batch = Host.objects.bulk_create(
            Host(name=f"gpu-{i:05d}", address="127.0.0.1", port=2201, credential=credential,
                 host_key=f.HOST_KEY, host_key_status=HostKeyStatus.PINNED,
                 last_probe_at=now - dt.timedelta(seconds=random.uniform(0, 60)))
            for i in range(start + 1, min(start + 2001, args.hosts + 1))
        )  # fmt: skip
        snaps = StateSnapshot.objects.bulk_create(
            scaffold.ok_snapshot(h, h.last_probe_at, duration_ms=60, parsed=parsed, digest=digest)
            for h in batch
        )
        HostHealth.objects.bulk_create(
            HostHealth(host=h, verdict=(v := random.choice(verdicts)), severity=severity[v],
                       since=now, computed_at=now, snapshot=s, serving="kimi-k2.5")
            for h, s in zip(batch, snaps, strict=True)
        )  # fmt: skip
        hosts += batch
    print(f"loaded {len(hosts)} hosts", flush=True)

    big = hosts[0]
    for start in range(0, args.history, 5000):
        snaps = StateSnapshot.objects.bulk_create(
            scaffold.ok_snapshot(big, now - dt.timedelta(minutes=i + 1), duration_ms=60,
                                 parsed=parsed, digest=digest)
            for i in range(start, min(start + 5000, args.history))
        )  # fmt: skip
        GpuSample.objects.bulk_create(
            GpuSample(host=big, snapshot=s, taken_at=s.taken_at,
                      minute=GpuSample.minute_of(s.taken_at), gpu=g, memory_used_mib=96900,
                      memory_total_mib=97887, power_draw_w=300.0 + g, utilization_pct=40,
                      temperature_c=60)
            for s in snaps for g in range(8)
        )  # fmt: skip
    print(f"loaded {args.history} snapshots of {big.name}", flush=True)

    catalog = f.make_catalog()
    for start in range(0, args.approvals, 500):
        chunk = hosts[1 + start : 1 + min(start + 500, args.approvals)]
        deployments = Deployment.objects.bulk_create(
            Deployment(host=h, unit=f.UNIT, model=catalog["NVFP4"], tensor_parallel_size=8)
            for h in chunk
        )
        snaps = {s.host_id: s for s in StateSnapshot.objects.filter(host__in=chunk)}
        ChangeRequest.objects.bulk_create(
            ChangeRequest(host=d.host, deployment=d, kind="model_swap", snapshot=snaps[d.host_id],
                          reason="INT4 is faster", requested_by_name="otto", needs_approval=True,
                          params_digest="-", correlation_id=f"c-{d.pk}",
                          status=ChangeStatus.PENDING_APPROVAL)
            for d in deployments
        )  # fmt: skip
    print(f"loaded {args.approvals} waiting changes", flush=True)

    snap = StateSnapshot.objects.filter(host=big).first()
    with acting("system:beat"):
        for start in range(0, args.events, 1000):
            audit.record_many([
                {"action": "probe.completed", "target": snap, "host": hosts[i % len(hosts)],
                 "snapshot": snap, "data": {"status": "ok", "trigger": "schedule"}}
                for i in range(start, start + 1000)
            ])  # fmt: skip
    print(f"loaded {args.events} audit events", flush=True)


def session_cookie() -> str:
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    from controlplane.accounts.roles import APPROVER, VIEWER

    user = scaffold.bench_user("bench-anna", VIEWER, APPROVER, password="x-bench-password-1")
    store = SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.save()
    return str(store.session_key)


def query_counts(pages: dict[str, str]) -> dict[str, int]:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = scaffold.signed_in_client(User.objects.get(username="bench-anna"))
    counts = {}
    for name, url in pages.items():
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        counts[name] = len(captured)
    return counts


def storm(db_url: str) -> subprocess.Popen[bytes]:
    """A process appending 500 probe events a second through the real chain."""
    return subprocess.Popen([sys.executable, __file__, "--storm", "--database", db_url])


def storm_child(db_url: str) -> None:
    scaffold.django_setup(db_url)
    from controlplane.audit import services as audit
    from controlplane.audit.context import acting
    from hosts.models import Host, StateSnapshot

    host = Host.objects.get(name=BIG)
    snap = StateSnapshot.objects.filter(host=host).first()
    event = {"action": "probe.completed", "target": snap, "host": host, "snapshot": snap,
             "data": {"status": "ok", "trigger": "schedule"}}  # fmt: skip
    with acting("system:beat"):
        while True:
            audit.record_many([event] * 50)
            time.sleep(0.1)


def hammer(url: str, cookie: str, users: int, seconds: float, think: float) -> list[float]:
    import requests

    times: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def user() -> None:
        s = requests.Session()
        s.cookies.set("sessionid", cookie)
        time.sleep(random.uniform(0, think))
        while time.monotonic() < deadline:
            t = time.perf_counter()
            r = s.get(url, timeout=30)
            took = time.perf_counter() - t
            if r.status_code != 200:
                raise SystemExit(f"{url}: {r.status_code}")
            with lock:
                times.append(took)
            time.sleep(random.expovariate(1 / think) if think else 0)

    threads = [threading.Thread(target=user) for _ in range(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times


def hammer_n(url: str, cookie: str, n: int) -> list[float]:
    import requests

    s = requests.Session()
    s.cookies.set("sessionid", cookie)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        r = s.get(url, timeout=30)
        times.append(time.perf_counter() - t)
        if r.status_code != 200:
            raise SystemExit(f"{url}: {r.status_code}")
    return times


def server_ms_after(log: Path, mark: int) -> list[float]:
    """gunicorn's own time (%(D)s, microseconds) of each request logged since `mark`, in ms."""
    return [
        int(line.split()[-1]) / 1000 for line in scaffold.lines_after(log, mark) if line.strip()
    ]


def main() -> None:
    parser = scaffold.parser_for(__doc__)
    parser.add_argument("--database", default=scaffold.DEFAULT_DATABASE)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--history", type=int, default=50_000)
    parser.add_argument("--approvals", type=int, default=1_000)
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--think", type=float, default=1.0)
    parser.add_argument("--server-workers", type=int, default=3)
    parser.add_argument("--port", type=int, default=8731)
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--storm", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.storm:
        storm_child(args.database)
        return
    STATE.mkdir(parents=True, exist_ok=True)

    import psycopg

    db_url = scaffold.fresh_database(args.database, DB_NAME, reuse=args.reuse)
    # Also on --reuse: a database loaded before the code's newest migration (an index) would
    # measure the old schema.
    scaffold.migrate_in_child(dict(os.environ, DATABASE_URL=db_url))
    scaffold.django_setup(db_url)
    if not args.reuse:
        load(args)
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
    cookie = session_cookie()
    pages = {
        "fleet, first page (verdict order)": "/",
        "fleet, page 100 by age": "/?sort=age&page=100",
        "fleet, failed only": "/?verdict=failed",
        "fleet, name filter": "/?q=gpu-09",
        "fleet rows (htmx refresh)": "/hosts/rows/",
        f"host page, {args.history} snapshots": f"/hosts/{BIG}/",
        "host charts, 7 days": f"/hosts/{BIG}/gpu-series.json?window=7d",
        f"approvals queue, {args.approvals} waiting": "/approvals/",
        "approvals queue, last page": f"/approvals/?page={max(1, -(-args.approvals // 50))}",
        "audit history during a probe storm": "/audit/",
        "audit history of one host": f"/audit/?host={BIG}",
    }
    counts = query_counts(pages)
    log = STATE / "access.log"
    log.unlink(missing_ok=True)
    server = subprocess.Popen(
        [*scaffold.gunicorn_argv(args.port, args.server_workers, log, "%(U)s?%(q)s %(s)s %(D)s"),
         "--log-level", "warning"],
        cwd=scaffold.ROOT, env=dict(os.environ, DATABASE_URL=db_url),
    )  # fmt: skip
    storming = None
    try:
        time.sleep(4)
        rows = []
        for name, url in pages.items():
            if "probe storm" in name:
                storming = storm(db_url)
                time.sleep(2)
            full = f"http://127.0.0.1:{args.port}{url}"
            hammer(full, cookie, 5, 3, 0.2)  # warm-up
            # one user alone, back to back: what a request costs with no queue for the CPU
            mark = scaffold.log_size(log)
            alone_client = hammer_n(full, cookie, 20)
            alone = server_ms_after(log, mark)
            mark = scaffold.log_size(log)
            load0 = loadavg()
            started = time.monotonic()
            client = hammer(full, cookie, args.users, args.seconds, args.think)
            took = time.monotonic() - started
            load1 = loadavg()
            server_ms = server_ms_after(log, mark)
            if storming is not None:
                scaffold.stop(storming, timeout=10)
                storming = None
            rows.append((name, url, counts[name], len(server_ms), statistics.median(server_ms),
                         pct(server_ms, 95), statistics.median(client) * 1000,
                         pct(client, 95) * 1000, statistics.median(alone),
                         len(server_ms) / took, load0, load1,
                         statistics.median(alone_client) * 1000))  # fmt: skip
            print(f"measured {name}", flush=True)
    finally:
        if storming is not None:
            storming.kill()
        scaffold.stop(server, timeout=20)
    print(f"\n{args.users} users, each waiting {args.think:g} s (exponential) between requests, "
          f"{args.seconds:g} s per page; gunicorn {args.server_workers} sync workers; "
          f"'alone': one user, 20 requests back to back, server median")  # fmt: skip
    print(f"{'page':<42} {'queries':>7} {'alone':>8} {'req/s':>6} {'server p50':>10} {'p95':>7} "
          f"{'client p50':>10} {'p95':>7}  load average before / after")  # fmt: skip
    for name, _url, q, _n, p50, p95, c50, c95, a50, rate, l0, l1, _ac in rows:
        print(f"{name:<42} {q:>7} {a50:>5.1f} ms {rate:>6.1f} {p50:>8.1f} ms {p95:>4.0f} ms "
              f"{c50:>8.1f} ms {c95:>4.0f} ms  {l0} / {l1}")  # fmt: skip


if __name__ == "__main__":
    main()
