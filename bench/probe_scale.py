#!/usr/bin/env python
"""Probing at fleet size: N simulated hosts at their interval on W Celery worker processes.

    .venv/bin/python bench/probe_scale.py --hosts 10000 --workers 4 --minutes 10 \\
        --database postgres://postgres@127.0.0.1:5432/controlplane

What runs, all real and all on this machine:
- the fleet: `--sim-procs` simulator processes (simulator.server.SimFleet), each on a loopback
  address of its own (127.0.10.k, ports from 20001), so 10,000 hosts need no port above the
  ephemeral range and nothing collides with tests binding 127.0.0.1;
- a fresh PostgreSQL database (`controlplane_scale_bench`), migrated, the fleet registered
  with the function `simfleet --register` uses (or `--reuse` one loaded before);
- W workers: `celery worker -P threads -c 2`, the way ARCHITECTURE.md says to run probe
  workers, each with its own probe queue and SSH pool (hosts.services.probe_routing);
- Celery beat with the product's schedule (the sweep every PROBE_SWEEP_SECONDS, retention,
  audit checkpoints and verification), on a queue of this run's own.

It samples each worker's CPU time and memory from /proc every 5 s, and after the run reads
from the database, per host, the gaps between consecutive snapshots in the measured window
(after `--warmup` seconds, which include the first, cold round) and the age of the newest one
at the end: the worst of these is the worst snapshot age anyone could have seen.

With --against CHECKOUT (another checkout with its own .venv, e.g. the code before a change),
the same run goes first with that checkout's code (workers, beat, simulator, registration, on
the database `probe_scale_before`), then with this one's (`probe_scale_after`); both reports
are printed, then each part's CPU per snapshot before and after and their ratio.

    .venv/bin/python bench/probe_scale.py --hosts 1000 --workers 1 --minutes 3 --against ../base

With --pairs N the two go in turn N times (before, after, before, after, ...) and the medians
are compared: the machine's own speed can drift by tens of percent within an hour, which one
run of each, minutes apart, cannot tell from the code.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# --root CHECKOUT (what --against runs): that checkout's scaffold, so the workers, beat, the
# simulator and the registration all run its code with its interpreter.
if "--root" in sys.argv:
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--root") + 1]).resolve() / "bench"))

import scaffold
from scaffold import CLK_TCK, loadavg, machine_busy, postgres_cpu

# logs, beat's schedule and checkpoints: in this script's checkout, whichever code runs
STATE = Path(__file__).resolve().parent.parent / ".run" / "bench-scale"
DB_NAME = "controlplane_scale_bench"


def proc_sample(pid: int) -> tuple[float, float]:
    """(CPU seconds, RSS MB) of a process, from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / CLK_TCK
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return cpu, rss


def ages(window_start: float, window_end: float) -> dict[str, float]:
    """Per-host gaps between consecutive snapshots in the window, and the newest's age at its
    end: the ages a reader could have seen."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH s AS (
              SELECT host_id, taken_at,
                     lag(taken_at) OVER (PARTITION BY host_id ORDER BY taken_at) AS prev
              FROM hosts_statesnapshot
              WHERE taken_at >= to_timestamp(%s) - interval '5 minutes'
                AND taken_at <= to_timestamp(%s)
                AND host_id IN (SELECT id FROM hosts_host WHERE enabled)
            ), gaps AS (
              SELECT host_id, extract(epoch FROM taken_at - prev) AS gap FROM s
              WHERE prev IS NOT NULL AND taken_at >= to_timestamp(%s)
              UNION ALL
              SELECT host_id, %s - extract(epoch FROM max(taken_at)) FROM s GROUP BY host_id
            )
            SELECT max(gap), percentile_cont(0.5) WITHIN GROUP (ORDER BY gap),
                   percentile_cont(0.99) WITHIN GROUP (ORDER BY gap),
                   count(DISTINCT host_id), count(*), count(*) FILTER (WHERE gap > 75),
                   count(*) FILTER (WHERE gap > 120),
                   count(DISTINCT host_id) FILTER (WHERE gap > 75)
            FROM gaps
            """,
            [window_start, window_end, window_start, window_end],
        )
        worst, p50, p99, hosts, n_gaps, over75, over120, hosts_over75 = cursor.fetchone()
        cursor.execute(
            "SELECT count(*) FROM hosts_statesnapshot WHERE taken_at >= to_timestamp(%s) "
            "AND taken_at <= to_timestamp(%s)",
            [window_start, window_end],
        )
        snapshots = cursor.fetchone()[0]
        cursor.execute(
            "SELECT status, count(*) FROM hosts_statesnapshot WHERE taken_at >= "
            "to_timestamp(%s) GROUP BY status", [window_start])  # fmt: skip
        statuses = dict(cursor.fetchall())
        cursor.execute(
            "SELECT action, count(*) FROM audit_auditevent WHERE created_at >= to_timestamp(%s)"
            " AND created_at <= to_timestamp(%s) GROUP BY action",
            [window_start, window_end],
        )
        events = dict(cursor.fetchall())
        # fairness: how many snapshots each enabled host got in the window (0 included)
        cursor.execute(
            """
            SELECT n, count(*) FROM (
              SELECT h.id, count(s.id) AS n FROM hosts_host h
              LEFT JOIN hosts_statesnapshot s ON s.host_id = h.id
                AND s.taken_at >= to_timestamp(%s) AND s.taken_at <= to_timestamp(%s)
              WHERE h.enabled GROUP BY h.id
            ) per_host GROUP BY n ORDER BY n
            """,
            [window_start, window_end],
        )
        per_host = {int(n): hosts for n, hosts in cursor.fetchall()}
    return {"worst": float(worst or 0), "p50": float(p50 or 0), "p99": float(p99 or 0),
            "hosts_seen": hosts, "snapshots": snapshots, "gaps": n_gaps, "gaps_over_75": over75,
            "gaps_over_120": over120, "hosts_over_75": hosts_over75, "statuses": statuses,
            "audit_events": events, "snapshots_per_host": per_host}  # fmt: skip


def run(args: argparse.Namespace) -> dict:
    STATE.mkdir(parents=True, exist_ok=True)
    db_url = scaffold.fresh_database(args.database, args.db_name, reuse=args.reuse)
    env = dict(os.environ, DATABASE_URL=db_url)
    if not args.reuse:
        scaffold.migrate_in_child(env)
        scaffold.fresh_checkpoints(STATE / "checkpoints")
    sims = scaffold.start_sim_slices(args.hosts, args.sim_procs, STATE)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        scaffold.django_setup(db_url)
        from hosts.models import Host
        from simulator.server import host_names

        started = time.monotonic()
        names = host_names(args.hosts)
        if Host.objects.filter(name__in=names).count() != args.hosts:
            print(f"registered {scaffold.register_sim_slices(args.sim_procs, STATE)} hosts in "
                  f"{time.monotonic() - started:.0f} s", flush=True)  # fmt: skip
        # a database loaded for a larger run: only this fleet's hosts are probed
        Host.objects.exclude(name__in=names).update(enabled=False)
        Host.objects.filter(name__in=names).update(
            enabled=True, last_probe_at=None, probe_claimed_at=None
        )
        queue = scaffold.run_queue("bench")
        wenv = dict(env, CELERY_TASK_DEFAULT_QUEUE=queue, LOG_LEVEL="WARNING",
                    AUDIT_CHECKPOINT_DIR=str(STATE / "checkpoints"),
                    PROBE_CONCURRENCY=str(args.concurrency))  # fmt: skip
        workers = [
            scaffold.start_logged(scaffold.celery_worker_argv(f"probe{i}", queue, args.threads),
                                  wenv, STATE / f"worker{i}.log")
            for i in range(args.workers)
        ]  # fmt: skip
        procs += workers
        time.sleep(8)  # workers up and announced before beat's first sweep
        procs.append(scaffold.start_logged(scaffold.celery_beat_argv(STATE / "beat-schedule"),
                                           wenv, STATE / "beat.log"))  # fmt: skip
        t0 = time.time()
        window_start = t0 + args.warmup
        end = window_start + args.minutes * 60
        samples: dict[int, list[tuple[float, float, float]]] = {w.pid: [] for w in workers}
        sim_cpu0 = None
        pg_cpu0 = 0.0
        busy0 = (0.0, 0.0)
        load0 = loadavg()
        while time.time() < end:
            now = time.time()
            for w in workers:
                if w.poll() is not None:
                    raise SystemExit(f"worker {w.pid} exited; see {STATE}/worker*.log")
                cpu, rss = proc_sample(w.pid)
                samples[w.pid].append((now, cpu, rss))
            if sim_cpu0 is None and now >= window_start:
                sim_cpu0 = sum(proc_sample(s.pid)[0] for s in sims)
                pg_cpu0 = postgres_cpu()
                busy0 = machine_busy()
                load0 = loadavg()
            time.sleep(5)
        sim_cpu = sum(proc_sample(s.pid)[0] for s in sims) - (sim_cpu0 or 0)
        pg_cpu = postgres_cpu() - pg_cpu0
        busy1 = machine_busy()
        load = loadavg()
        finished = time.time()
        per_worker = []
        for w in workers:
            inside = [s for s in samples[w.pid] if s[0] >= window_start]
            span = inside[-1][0] - inside[0][0]
            per_worker.append({
                "cpu_share": (inside[-1][1] - inside[0][1]) / span,
                "rss_mb_max": max(s[2] for s in inside),
                "rss_mb_end": inside[-1][2],
            })  # fmt: skip
        window = finished - window_start
        result = {
            "hosts": args.hosts, "workers": args.workers, "threads": args.threads,
            "minutes": args.minutes, "window_s": window, "per_worker": per_worker,
            "sim_cpu_share": sim_cpu / window, "postgres_cpu_share": pg_cpu / window,
            "machine_busy_cores": (busy1[0] - busy0[0]) / window,
            "machine_cores": os.cpu_count(), "load_average_start": load0,
            "load_average_end": load,
            **ages(window_start, finished),
        }  # fmt: skip
        total = sum(w["cpu_share"] for w in per_worker)
        result["worker_cores"] = total
        return result
    finally:
        scaffold.stop_all(procs)
        scaffold.stop_all(sims)


def report(r: dict) -> None:
    print(f"\n{r['hosts']} hosts, {r['workers']} worker processes (threads pool, "
          f"{r['threads']} threads), measured {r['minutes']} min after the warm-up")  # fmt: skip
    print(f"snapshot age: worst {r['worst']:.1f} s, p99 {r['p99']:.1f} s, median "
          f"{r['p50']:.1f} s  ({r['hosts_seen']} hosts, {r['snapshots']} snapshots)")  # fmt: skip
    if "gaps" in r:  # not in runs saved before it was counted
        print(f"ages over 75 s: {r['gaps_over_75']} of {r['gaps']} ({r['hosts_over_75']} "
              f"hosts); over 120 s: {r['gaps_over_120']}; expected snapshots at 60 s "
              f"{r['hosts'] * r['minutes']:.0f}")  # fmt: skip
    print(f"statuses {r['statuses']}; audit events in the window {r['audit_events']}")
    if "snapshots_per_host" in r:  # not in runs saved before it was counted
        spread = ", ".join(f"{n}: {k}" for n, k in sorted(
            (int(n), k) for n, k in r["snapshots_per_host"].items()))  # fmt: skip
        print(f"snapshots per host in the window (snapshots: hosts) {spread}")
    print(f"{'worker':>6} {'CPU share':>10} {'RSS max MB':>11} {'RSS end MB':>11}")
    for i, w in enumerate(r["per_worker"]):
        print(f"{i:>6} {w['cpu_share']:>10.2f} {w['rss_mb_max']:>11.0f} {w['rss_mb_end']:>11.0f}")
    print(f"workers together {r['worker_cores']:.2f} cores, simulator "
          f"{r['sim_cpu_share']:.2f} cores, PostgreSQL {r['postgres_cpu_share']:.2f} cores "
          f"(all its databases); the whole machine {r['machine_busy_cores']:.2f} "
          f"of {r['machine_cores']} cores busy")  # fmt: skip
    # Per snapshot stored: what one probe costs each part, and so how many hosts one core of
    # workers keeps at a 60 s interval. (A run saved before window_s was recorded: its
    # window is taken as --minutes, which the sampling loop overruns by at most 5 s.)
    window = r.get("window_s") or r["minutes"] * 60
    if not r["snapshots"]:
        print("no snapshot was stored in the window: nothing to divide the CPU by")
        return
    per = {k: r[k] * window / r["snapshots"] * 1000 for k in
           ("worker_cores", "sim_cpu_share", "postgres_cpu_share")}  # fmt: skip
    print(f"CPU per snapshot: workers {per['worker_cores']:.1f} ms, simulator "
          f"{per['sim_cpu_share']:.1f} ms, PostgreSQL {per['postgres_cpu_share']:.1f} ms "
          f"(an upper bound: other databases' work included); {r['snapshots'] / window:.1f} "
          f"snapshots/s stored, {r['hosts'] / 60:.1f}/s due; one worker-core keeps "
          f"{60_000 / per['worker_cores']:.0f} hosts at 60 s")  # fmt: skip
    print(f"load average (1, 5, 15 min) at the window's start {r['load_average_start']}, "
          f"at its end {r['load_average_end']}")  # fmt: skip


def side_by_side(args: argparse.Namespace) -> None:
    """The measurement with --against's checkout (before), then with this one (after), each in
    a process of its own on a fresh database of its own, `--pairs` times in turn; each report,
    then each part's median CPU per snapshot before and after, and their ratio."""
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    forwarded = _without(sys.argv[1:], ("--against", "--pairs"))
    for _ in range(args.pairs):
        for label, checkout in (("before", args.against), ("after", None)):
            runs[label].append(_one_side(label, checkout, forwarded))
    print(f"\nCPU per snapshot, before -> after (after/before), medians of {args.pairs} run(s):")
    for key, what in (("worker_cores", "workers"), ("sim_cpu_share", "simulator"),
                      ("postgres_cpu_share", "PostgreSQL")):  # fmt: skip
        before = statistics.median(r[key] for r in runs["before"])
        after = statistics.median(r[key] for r in runs["after"])
        each = " ".join(f"{b[key]:.2f}/{a[key]:.2f}" for b, a in zip(*runs.values(), strict=True))
        print(f"  {what:<10} {before:6.2f} ms -> {after:6.2f} ms  ({after / before:.2f})"
              f"   each pair: {each}")  # fmt: skip


def _without(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """`argv` less each of `options` with its value (`--name value` or `--name=value`)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in options:
            skip = True
        elif not arg.startswith(tuple(f"{o}=" for o in options)):
            kept.append(arg)
    return kept


def _one_side(label: str, checkout: str | None, forwarded: list[str]) -> dict[str, float]:
    """One run with `checkout`'s code (None: this one): its CPU per snapshot, ms, per part."""
    python = str(Path(checkout, ".venv", "bin", "python")) if checkout else sys.executable
    root = ["--root", str(Path(checkout).resolve())] if checkout else []
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        print(f"--- {label}: {checkout or scaffold.ROOT} ({time.strftime('%H:%M:%S')}, load "
              f"average {loadavg()})", flush=True)  # fmt: skip
        subprocess.run(
            [python, __file__, *forwarded, *root, "--db-name", f"probe_scale_{label}",
             "--json", out.name],
            cwd=checkout or scaffold.ROOT, check=True,
        )  # fmt: skip
        r = json.loads(Path(out.name).read_text())
    window = r.get("window_s") or r["minutes"] * 60
    return {k: r[k] * window / r["snapshots"] * 1000 for k in
            ("worker_cores", "sim_cpu_share", "postgres_cpu_share")}  # fmt: skip


def main() -> None:
    parser = scaffold.parser_for(__doc__)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="per worker (threads pool)")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--warmup", type=float, default=90, help="seconds before measuring")
    parser.add_argument("--sim-procs", type=int, default=0, help="default: one per 2,500 hosts")
    parser.add_argument("--concurrency", type=int, default=200, help="PROBE_CONCURRENCY")
    parser.add_argument("--database", default=scaffold.DEFAULT_DATABASE)
    parser.add_argument("--reuse", action="store_true", help="keep the loaded database")
    parser.add_argument("--db-name", default=DB_NAME, help="the scratch database's name")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--report", metavar="JSON", help="print the figures a run saved")
    parser.add_argument(
        "--against",
        metavar="CHECKOUT",
        help="run the same measurement with that checkout's code first (before), then this one's",
    )
    parser.add_argument(
        "--pairs", type=int, default=1, help="with --against: how many before/after runs in turn"
    )
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.report:
        report(json.loads(Path(args.report).read_text()))
        return
    if args.against:
        side_by_side(args)
        return
    args.sim_procs = args.sim_procs or scaffold.sim_slices_for(args.hosts)
    result = run(args)
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
