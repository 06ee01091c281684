"""The host page's GPU charts over a long history: query count and time per window.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/controlplane \
        .venv/bin/python bench/gpu_charts.py [--snapshots 50000] [--runs 20]

Uses its own database next to DATABASE_URL's (default `controlplane_bench_charts`, dropped and
created again unless --reuse), migrates it, stores --snapshots snapshots of one 8-GPU host a
minute apart (ending now) and their GPU samples, plus --other-hosts hosts with the same
history so the index has to pick one host out of many, runs VACUUM ANALYZE (as autovacuum
would have by then), then measures for each window (1h, 24h, 7d):

- `hosts.charts.gpu_chart_series` alone: its queries and the median wall time of --runs runs
  after one warm-up;
- the JSON view `hosts:gpu_series` as a signed-in viewer gets it through Django's test client
  (middleware, session, roles, query, JSON encoding);
- PostgreSQL's plan of the 7-day query (EXPLAIN ANALYZE, BUFFERS).

Aim: one query per window, every response under 100 ms.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time
from typing import Any

import scaffold
from scaffold import median_ms

AIM_MS = 100.0
GPUS = 8


def _load(snapshots: int, hosts: int) -> Any:
    """Snapshots through the ORM (whatever columns they have by now), samples in SQL."""
    from django.db import connection
    from django.utils import timezone

    from hosts.models import GpuSample, Host, StateSnapshot

    end = timezone.now().replace(second=0, microsecond=0)
    first = None
    for n in range(hosts):
        host = Host.objects.create(name=f"gpu-{n + 1:03d}", address=f"10.0.0.{n + 1}")
        first = first or host
        StateSnapshot.objects.bulk_create(
            (
                scaffold.ok_snapshot(
                    host, end - dt.timedelta(minutes=i), duration_ms=800, parsed={}, digest=""
                )
                for i in range(snapshots)
            ),
            batch_size=5000,
        )
    # Readings that move (daily cycles, a little different per GPU), so no aggregate is free.
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {GpuSample._meta.db_table}
                (host_id, snapshot_id, minute, gpu, memory_used_mib,
                 memory_total_mib, power_draw_w, utilization_pct, temperature_c)
            SELECT s.host_id, s.id, (extract(epoch FROM s.taken_at) / 60)::int, g,
                   (97887 * (0.55 + 0.35 * l))::int, 97887, 90 + 480 * l,
                   (100 * l)::int, (34 + 40 * l)::int
            FROM {StateSnapshot._meta.db_table} s
            CROSS JOIN generate_series(0, {GPUS - 1}) g
            CROSS JOIN LATERAL (
                SELECT 0.5 + 0.45 * sin(2 * pi() * (extract(epoch FROM s.taken_at) / 86400
                                                    + g / 40.0)) AS l
            ) load
            ORDER BY s.taken_at, s.host_id, g  -- as probes write them: hosts interleaved
            """
        )
        cursor.execute("VACUUM ANALYZE")
    return first


def _measure(host: Any, runs: int) -> list[dict[str, Any]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from controlplane.accounts.roles import VIEWER
    from hosts.charts import WINDOWS, gpu_chart_series

    client = scaffold.signed_in_client(scaffold.bench_user("bench-viewer", VIEWER))
    url = reverse("hosts:gpu_series", args=[host.name])
    results = []
    for window in WINDOWS:
        with CaptureQueriesContext(connection) as queries:
            data = gpu_chart_series(host, window)
        with CaptureQueriesContext(connection) as view_queries:
            response = client.get(url, {"window": window})
        assert response.status_code == 200, response.content[:200]
        results.append(
            {
                "window": window,
                "queries": len(queries.captured_queries),
                "view_queries": len(view_queries.captured_queries),
                "points": len(data["t"]),
                "selector_ms": median_ms(lambda w=window: gpu_chart_series(host, w), runs),
                "view_ms": median_ms(lambda w=window: client.get(url, {"window": w}), runs),
                "bytes": len(response.content),
            }
        )
    return results


def _explain(host: Any) -> str:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from hosts.charts import gpu_chart_series

    with CaptureQueriesContext(connection) as queries:
        gpu_chart_series(host, "7d")
    sql = queries.captured_queries[0]["sql"]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--snapshots", type=int, default=50_000, help="per host, a minute apart")
    parser.add_argument("--other-hosts", type=int, default=3)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--database", default="controlplane_bench_charts")
    parser.add_argument("--reuse", action="store_true", help="keep the database if it exists")
    args = parser.parse_args()

    base = os.environ.get("DATABASE_URL", scaffold.DEFAULT_DATABASE)
    scaffold.django_setup(scaffold.fresh_database(base, args.database, reuse=args.reuse))
    scaffold.migrate()
    from hosts.models import GpuSample, Host

    start = time.perf_counter()
    host = Host.objects.order_by("pk").first()
    if host is None:
        host = _load(args.snapshots, 1 + args.other_hosts)
    rows = GpuSample.objects.filter(host=host).count()
    print(
        f"{rows:,} samples for {host.name} ({rows // GPUS:,} snapshots x {GPUS} GPUs), "
        f"{GpuSample.objects.count():,} in all; ready in {time.perf_counter() - start:.1f} s"
    )
    print(f"{'window':>6} {'points':>6} {'queries':>7} {'view q':>6} {'selector':>10} "
          f"{'view':>10} {'JSON':>8}")  # fmt: skip
    worst = 0.0
    for r in _measure(host, args.runs):
        worst = max(worst, r["view_ms"])
        print(
            f"{r['window']:>6} {r['points']:>6} {r['queries']:>7} {r['view_queries']:>6} "
            f"{r['selector_ms']:>7.1f} ms {r['view_ms']:>7.1f} ms {r['bytes'] / 1024:>5.1f} KB"
        )
    print("\nEXPLAIN ANALYZE of the 7-day query:\n" + _explain(host))
    verdict = "met" if worst < AIM_MS else "MISSED"
    print(f"\nslowest view {worst:.1f} ms; aim {AIM_MS:.0f} ms: {verdict}")


if __name__ == "__main__":
    main()
