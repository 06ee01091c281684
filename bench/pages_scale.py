#!/usr/bin/env python
"""The pages people keep open, at fleet size, under 50 concurrent users.

    .venv/bin/python bench/pages_scale.py --database postgres://postgres@127.0.0.1:5432/controlplane
    # options: --hosts 10000 --history 50000 --approvals 1000 --events 300000 --users 50
    #          --seconds 30 --think 1.0 --reuse (measure an already loaded database again)
    #          --against ../other-checkout (serve it too, as "before", and compare)

Loads a fresh PostgreSQL database (`--db-name`, by default `controlplane_pages_bench`):
`--hosts` hosts, each with a verdict and a snapshot; one of them (`gpu-00001`) with
`--history` snapshots a minute apart and their GPU samples; `--approvals` model swaps waiting
for approval, each on a host of its own; `--events` audit events through the real chain. Then
serves the product with gunicorn (`--server-workers` sync workers, as the Dockerfile runs it)
and sends each page's requests from `--users` simulated users at once, each signed in, waiting
`--think` seconds between its requests. While the audit history is measured, a "probe storm"
appends 500 audit events a second through `record_many`.

Server time is gunicorn's own (`%(D)s` in its access log: from reading the request to the
last byte written); the client's time on loopback is printed beside it. Each page's
queries are counted once with Django's test client.

With `--against`, a second gunicorn serves that checkout (its own .venv, the same database, the
next port): one user's requests alternate between the two, the 50 users go to one and then the
other, and both medians are printed with their ratio.
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
from typing import Any

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
            GpuSample(host=big, snapshot=s,
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
    store[BACKEND_SESSION_KEY] = "controlplane.accounts.backends.LocalPasswordBackend"
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
            r = s.get(url, timeout=30, allow_redirects=False)  # a sign-in page is no answer
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
        r = s.get(url, timeout=30, allow_redirects=False)
        times.append(time.perf_counter() - t)
        if r.status_code != 200:
            raise SystemExit(f"{url}: {r.status_code}")
    return times


def server_ms_after(log: Path, mark: int) -> list[float]:
    """gunicorn's own time (%(D)s, microseconds) of each request logged since `mark`, in ms."""
    return [
        int(line.split()[-1]) / 1000 for line in scaffold.lines_after(log, mark) if line.strip()
    ]


class Server:
    """One gunicorn serving a checkout (this one, or `--against`'s) with its own access log."""

    def __init__(self, label: str, checkout: Path, port: int, workers: int, db_url: str) -> None:
        self.label, self.port = label, port
        self.log = STATE / f"access-{label}.log"
        self.log.unlink(missing_ok=True)
        argv = scaffold.gunicorn_argv(port, workers, self.log, "%(U)s?%(q)s %(s)s %(D)s")
        if checkout != scaffold.ROOT:
            argv[0] = str(checkout / ".venv" / "bin" / "python")
        self.proc = subprocess.Popen(
            [*argv, "--log-level", "warning"],
            cwd=checkout,
            env=dict(os.environ, DATABASE_URL=db_url),
        )

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def alone(self, path: str, cookie: str, n: int) -> list[float]:
        """Server times (ms) of `n` requests from one user, back to back."""
        mark = scaffold.log_size(self.log)
        hammer_n(self.url(path), cookie, n)
        return server_ms_after(self.log, mark)

    def crowd(self, path: str, cookie: str, args: argparse.Namespace) -> dict[str, Any]:
        """`--users` users for `--seconds`: server and client times, rate, load average."""
        mark = scaffold.log_size(self.log)
        load0, started = loadavg(), time.monotonic()
        client = hammer(self.url(path), cookie, args.users, args.seconds, args.think)
        took, load1 = time.monotonic() - started, loadavg()
        server_ms = server_ms_after(self.log, mark)
        return {"p50": statistics.median(server_ms), "p95": pct(server_ms, 95),
                "c50": statistics.median(client) * 1000, "c95": pct(client, 95) * 1000,
                "rate": len(server_ms) / took, "load": f"{load0} / {load1}"}  # fmt: skip


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
    parser.add_argument("--db-name", default=DB_NAME, help="the scratch database's name")
    parser.add_argument("--load-only", action="store_true", help="load the database and stop")
    parser.add_argument("--against", type=Path, help="another checkout (with its .venv) to "
                        "serve beside this one, alternating, as 'before'")  # fmt: skip
    parser.add_argument("--alone", type=int, default=20, help="requests of the one user")
    parser.add_argument("--crowd", default="", help="measure the --users phase only for pages "
                        "named with any of these words (comma-separated)")  # fmt: skip
    parser.add_argument("--no-crowd", action="store_true", help="one user alone only")
    parser.add_argument("--storm", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.storm:
        storm_child(args.database)
        return
    STATE.mkdir(parents=True, exist_ok=True)

    import psycopg

    db_url = scaffold.fresh_database(args.database, args.db_name, reuse=args.reuse)
    # Also on --reuse: a database loaded before the code's newest migration (an index) would
    # measure the old schema.
    scaffold.migrate_in_child(dict(os.environ, DATABASE_URL=db_url))
    scaffold.django_setup(db_url)
    if not args.reuse:
        load(args)
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
    if args.load_only:
        return
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
    servers = [Server("after", scaffold.ROOT, args.port, args.server_workers, db_url)]
    if args.against:
        before = Server("before", args.against.resolve(), args.port + 1, args.server_workers,
                        db_url)  # fmt: skip
        servers.insert(0, before)
    crowd_words = [w for w in args.crowd.split(",") if w]
    storming = None
    rows = []
    try:
        time.sleep(4)
        for name, url in pages.items():
            if "probe storm" in name:
                storming = storm(db_url)
                time.sleep(2)
            for server in servers:
                hammer(server.url(url), cookie, 5, 3, 0.2)  # warm-up
            # one user alone, back to back: what a request costs with no queue for the CPU;
            # with two servers, one request to each in turn, so both see the same machine
            alone: dict[str, list[float]] = {s.label: [] for s in servers}
            for _ in range(args.alone):
                for server in servers:
                    alone[server.label] += server.alone(url, cookie, 1)
            crowd: dict[str, dict[str, Any]] = {}
            if not args.no_crowd and (not crowd_words or any(w in name for w in crowd_words)):
                for server in servers:
                    crowd[server.label] = server.crowd(url, cookie, args)
            if storming is not None:
                scaffold.stop(storming, timeout=10)
                storming = None
            rows.append((name, counts[name], {k: statistics.median(v) for k, v in alone.items()},
                         crowd, loadavg()))  # fmt: skip
            print(f"measured {name}", flush=True)
    finally:
        if storming is not None:
            storming.kill()
        for server in servers:
            scaffold.stop(server.proc, timeout=20)
    report(args, rows, [s.label for s in servers])


def report(args: argparse.Namespace, rows: list[Any], labels: list[str]) -> None:
    side = "; before and after side by side, alternating" if len(labels) > 1 else ""
    print(f"\n{args.users} users, each waiting {args.think:g} s (exponential) between requests, "
          f"{args.seconds:g} s per page; gunicorn {args.server_workers} sync workers; "
          f"'alone': one user, {args.alone} requests in a row, server median{side}")  # fmt: skip
    both = len(labels) > 1
    head = f"{'page':<36} {'queries':>7}"
    head += "  alone before    after  ratio" if both else "    alone"
    head += (
        "  p95 before  after  ratio" if both else "  req/s server p50     p95 client p50     p95"
    )
    print(head + "  load average (after the page)")
    for name, queries, alone, crowd, load in rows:
        line = f"{name:<36} {queries:>7}"
        if both:
            b, a = alone["before"], alone["after"]
            line += f"  {b:>9.1f} ms {a:>5.1f} ms {b / a:>5.1f}x"
            if crowd:
                cb, ca = crowd["before"]["p95"], crowd["after"]["p95"]
                line += f"  {cb:>7.0f} ms {ca:>4.0f} ms {cb / ca:>5.1f}x"
            else:
                line += f"  {'-':>10} {'-':>7} {'-':>6}"
        else:
            line += f" {alone['after']:>5.1f} ms"
            if crowd:
                c = crowd["after"]
                line += (f" {c['rate']:>6.1f} {c['p50']:>8.1f} ms {c['p95']:>4.0f} ms "
                         f"{c['c50']:>8.1f} ms {c['c95']:>4.0f} ms")  # fmt: skip
        print(f"{line}  {load}")
    if both and any(crowd for *_, crowd, _load in rows):
        print(
            f"\n{'under ' + str(args.users) + ' users':<36} {'':>7}  "
            "req/s   server p50 / p95        client p50 / p95        load average before / after"
        )
        for name, _q, _alone, crowd, _load in rows:
            for label in labels:
                if label in crowd:
                    c = crowd[label]
                    print(f"{name + ' (' + label + ')':<44} {c['rate']:>6.1f}  {c['p50']:>7.1f} / "
                          f"{c['p95']:>4.0f} ms   {c['c50']:>8.1f} / {c['c95']:>5.0f} ms   "
                          f"{c['load']}")  # fmt: skip


if __name__ == "__main__":
    main()
