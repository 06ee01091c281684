#!/usr/bin/env python
"""Probe fan-out: N simulated hosts probed through the real probe path, cold and warm.

    .venv/bin/python bench/probe_fanout.py [--sizes 50,200,500] [--rounds 4] [--database URL]

For each N, a child process gets a fresh database, starts `manage.py simfleet --register` as a
separate process (so the fleet does not share the client's interpreter), and calls
`hosts.services.hosts_probe` on all N hosts `--rounds` times: the same code the beat sweep runs,
including parsing, storing each snapshot and its audit event. Round 1 opens every connection;
later rounds reuse them. It also times the SSH part alone (`hosts.probe.probe_many`) on the
warm connections, and checks every snapshot came back `ok`.

With --against CHECKOUT (another checkout of the project with its own .venv, e.g. the code
before a change), each size is measured in both, alternately (`--pairs` times each): the same
child code runs with that checkout's interpreter, apps and simulator, against a fresh database
and a fleet of its own. It prints each run, then the medians of both and their ratio (after /
before): wall time and client CPU per host of the cold and warm rounds, and the simulator's
CPU per probe in the warm rounds (the fleet's process, read from /proc).

    .venv/bin/python bench/probe_fanout.py --sizes 500 --against ../base --pairs 3 \
        --database postgres://postgres@127.0.0.1:5432/controlplane

With --revisions, after the cold round every deployment adopts the unit its host runs as its
current revision (`deployments.revisions.deployment_current_revision`), as in a fleet whose
deployments have seen a change: the warm rounds' verdicts then read each one's revision, its
plan and its evaluations, which a freshly registered fleet has none of.

With --peers-dir (the OpenSSH fleet in ../shared/peers, started with its fleet/start.sh), the
same SSH path probes those hosts with the peers' own probe command instead, for a side-by-side
with the tools measured there.
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
from urllib.parse import urlsplit, urlunsplit

import scaffold


def _cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _process_cpu(pid: int) -> float:
    """CPU seconds of another process (the fleet), from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / scaffold.CLK_TCK


def _use_checkout(root: str) -> None:
    """Import the apps (and run manage.py) from `root` instead of this script's checkout."""
    mine = str(scaffold.ROOT)
    sys.path[:] = [p for p in sys.path if p != mine]
    scaffold.ROOT = Path(root).resolve()
    sys.path.insert(0, str(scaffold.ROOT))


def child(n: int, rounds: int, base_port: int, concurrency: int, revisions: bool) -> dict:
    scaffold.django_setup()  # on the DATABASE_URL run_size made for this size
    from django.conf import settings

    scaffold.migrate()
    tmp = Path(os.environ["BENCH_TMP"])
    fleet = scaffold.start_simfleet(n, base_port, tmp / "fleet", tmp / "fleet.log")
    try:
        from hosts import services
        from hosts.models import Host
        from hosts.probe import probe_many
        from hosts.ssh import ssh_loop

        settings.PROBE_CONCURRENCY = concurrency
        hosts = list(
            Host.objects.select_related("credential")
            .prefetch_related("deployments")
            .order_by("name")
        )
        assert len(hosts) == n, f"registered {len(hosts)} hosts, expected {n}"
        walls = []
        cpus = []  # this process's CPU: the client's whole cost (the fleet is another process)
        sim_cpus = []  # the fleet's
        statuses: dict[str, int] = {}
        for _ in range(rounds):
            started, cpu, sim_cpu = time.perf_counter(), _cpu(), _process_cpu(fleet.pid)
            snapshots = services.hosts_probe(hosts=hosts, trigger="schedule", integrity=False)
            walls.append(time.perf_counter() - started)
            cpus.append(_cpu() - cpu)
            sim_cpus.append(_process_cpu(fleet.pid) - sim_cpu)
            for snap in snapshots:
                statuses[snap.status] = statuses.get(snap.status, 0) + 1
            if revisions and len(walls) == 1:
                _adopt_revisions(hosts)
        jobs = [
            (services.ssh_target_for(h), services.probe_spec_for(h, integrity=False)) for h in hosts
        ]
        ssh_walls = []
        for _ in range(3):
            started = time.perf_counter()
            outcomes = ssh_loop.call(
                probe_many(ssh_loop.pool, jobs, concurrency=concurrency,  # type: ignore[arg-type]
                           connect_timeout=30, command_timeout=60)
            )  # fmt: skip
            ssh_walls.append(time.perf_counter() - started)
            assert all(o.status == "ok" for o in outcomes), {o.status for o in outcomes}
        return {
            "hosts": n,
            "cold_s": walls[0],
            "warm_s": statistics.median(walls[1:]) if rounds > 1 else None,
            "warm_ssh_only_s": statistics.median(ssh_walls),
            "cold_cpu_s": cpus[0],
            "warm_cpu_s": statistics.median(cpus[1:]) if rounds > 1 else None,
            "warm_sim_cpu_s": statistics.median(sim_cpus[1:]) if rounds > 1 else None,
            "statuses": statuses,
            "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
        }
    finally:
        scaffold.stop(fleet, timeout=20)


def _adopt_revisions(hosts: list[object]) -> None:
    from deployments.models import Deployment
    from deployments.revisions import deployment_current_revision

    deployments = Deployment.objects.filter(host__in=hosts)
    for deployment in deployments.select_related("host"):
        deployment_current_revision(deployment)
    assert not deployments.filter(current_revision__isnull=True).exists()


def run_size(n: int, args: argparse.Namespace, checkout: str | None = None) -> dict:
    """One child's figures for `n` hosts, with this checkout's code or `checkout`'s."""
    python, root = sys.executable, []
    if checkout is not None:
        python = str(Path(checkout, ".venv", "bin", "python"))
        root = ["--root", checkout]
    with tempfile.TemporaryDirectory(prefix="probe-bench-") as tmp:
        env = dict(os.environ, BENCH_TMP=tmp, AUDIT_CHECKPOINT_DIR=str(Path(tmp) / "ckpt"))
        if args.database:
            # a previous size's fleet may still be closing its sessions: force
            # this run's own: another run (of the other checkout, or someone else's) may
            # still be closing its sessions on one of the same name
            env["DATABASE_URL"] = scaffold.fresh_database(
                args.database, f"probe_fanout_{os.getpid()}_{n}", force=True
            )
        else:
            env["DATABASE_URL"] = f"sqlite:///{tmp}/bench.sqlite3"
        out = subprocess.run(
            [python, __file__, "--child", str(n), "--rounds", str(args.rounds),
             "--base-port", str(args.base_port), "--concurrency", str(args.concurrency),
             *(["--revisions"] if args.revisions else []), *root],
            env=env, cwd=checkout or scaffold.ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if args.database:
            _drop_database(env["DATABASE_URL"])
        if out.returncode != 0:
            raise SystemExit(f"N={n} failed:\n{out.stdout}\n{out.stderr}")
        return json.loads(out.stdout.strip().splitlines()[-1])


def _drop_database(url: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    maintenance = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _peer_rounds(
    targets: list, command: str, rounds: int, concurrency: int
) -> tuple[list[tuple[float, float]], set[str]]:
    """(wall seconds, client CPU seconds) of each round (round 1 opens the connections), and
    the ciphers the connections settled on."""
    from hosts.ssh import ConnectionPool, gather_limited

    pool = ConnectionPool()
    walls = []
    for _ in range(rounds):
        started, cpu = time.perf_counter(), _cpu()
        results = await gather_limited(
            (pool.run(t, command, connect_timeout=30, command_timeout=60) for t in targets),
            concurrency,
        )
        walls.append((time.perf_counter() - started, _cpu() - cpu))
        ok = sum(1 for t, r in zip(targets, results, strict=True) if t.address in r.stdout)
        assert ok == len(targets), f"{ok}/{len(targets)} hosts answered from themselves"
    ciphers = {str(conn.get_extra_info("send_cipher")) for conn in pool._conns.values()}
    await pool.close_all()
    return walls, ciphers


def peers(args: argparse.Namespace) -> None:
    """Time the same asyncssh pool against the peers' OpenSSH fleet with their probe command."""
    import asyncio

    import asyncssh

    from hosts.ssh import SSHTarget

    fleet = Path("/tmp/peers-fleet")
    addresses = (fleet / "hosts.txt").read_text().split()
    command = (Path(args.peers_dir) / "probe_command.txt").read_text().strip()
    key = (fleet / "client_ed25519").read_text()
    known = asyncssh.read_known_hosts(str(fleet / "known_hosts"))
    for n in args.sizes:
        targets = []
        for address in addresses[:n]:
            trusted = known.match(address, address, 2222)[0]
            pinned = trusted[0].export_public_key("openssh").decode().strip() if trusted else ""
            targets.append(SSHTarget(address, 2222, "root", key, pinned))
        rounds, ciphers = asyncio.run(_peer_rounds(targets, command, args.rounds, args.concurrency))
        (cold, cold_cpu), warm = rounds[0], rounds[1:]
        warm_wall = statistics.median(w for w, _ in warm)
        warm_cpu = statistics.median(c for _, c in warm)
        print(
            f"peers N={n}: cold {cold:.2f} s (client CPU {cold_cpu:.2f} s, "
            f"{1000 * cold_cpu / n:.2f} ms/host), warm median {warm_wall:.3f} s "
            f"(client CPU {warm_cpu:.2f} s, {1000 * warm_cpu / n:.2f} ms/host); "
            f"cipher {', '.join(sorted(ciphers))}"
        )


def _per_host_ms(seconds: float, n: int) -> float:
    return 1000 * seconds / n


def side_by_side(args: argparse.Namespace) -> None:
    """Each size in --against's checkout (before) and this one (after), alternately."""
    print(f"before: {Path(args.against).resolve()}, after: {scaffold.ROOT}; load average "
          f"{scaffold.loadavg()}", flush=True)  # fmt: skip
    print(f"{'hosts':>6} {'run':>7} {'cold s':>7} {'warm s':>7} {'cold CPU ms/h':>14} "
          f"{'warm CPU ms/h':>14} {'sim CPU ms/probe':>17}  statuses", flush=True)  # fmt: skip
    for n in args.sizes:
        runs: dict[str, list[dict]] = {"before": [], "after": []}
        for _ in range(args.pairs):
            for label, checkout in (("before", args.against), ("after", None)):
                r = run_size(n, args, checkout)
                runs[label].append(r)
                print(
                    f"{n:>6} {label:>7} {r['cold_s']:>7.2f} {r['warm_s']:>7.2f} "
                    f"{_per_host_ms(r['cold_cpu_s'], n):>14.2f} "
                    f"{_per_host_ms(r['warm_cpu_s'], n):>14.2f} "
                    f"{_per_host_ms(r['warm_sim_cpu_s'], n):>17.2f}  {r['statuses']}",
                    flush=True,
                )
        print(f"medians of {args.pairs} runs each, N={n} (load average {scaffold.loadavg()}):")
        for key, what, per_host in (
            ("cold_s", "cold round, wall s", False),
            ("warm_s", "warm round, wall s", False),
            ("cold_cpu_s", "cold round, client CPU ms/host", True),
            ("warm_cpu_s", "warm round, client CPU ms/host", True),
            ("warm_sim_cpu_s", "warm round, simulator CPU ms/probe", True),
        ):
            before, after = (statistics.median(r[key] for r in runs[k]) for k in runs)
            if per_host:
                before, after = _per_host_ms(before, n), _per_host_ms(after, n)
            print(f"  {what:<36} before {before:>7.2f}  after {after:>7.2f}  "
                  f"after/before {after / before:.2f}")  # fmt: skip


def main() -> None:
    parser = scaffold.parser_for(__doc__)
    parser.add_argument(
        "--sizes", default="50,200,500", type=lambda s: [int(x) for x in s.split(",")]
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--base-port", type=int, default=23000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--database", help="a PostgreSQL URL; a fresh database per size is made")
    parser.add_argument(
        "--peers-dir", help="probe the running peers fleet instead of the simulator"
    )
    parser.add_argument(
        "--against", metavar="CHECKOUT", help="measure this checkout too, alternately (before)"
    )
    parser.add_argument("--pairs", type=int, default=3, help="with --against: runs of each")
    parser.add_argument(
        "--revisions", action="store_true", help="deployments adopt revisions after the cold round"
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.root:
            _use_checkout(args.root)
        figures = child(args.child, args.rounds, args.base_port, args.concurrency, args.revisions)
        print(json.dumps(figures))
        return
    if args.peers_dir:
        peers(args)
        return
    if args.against:
        side_by_side(args)
        return
    print(f"{'hosts':>6} {'cold s':>8} {'hosts/s':>8} {'warm s':>8} {'hosts/s':>8} "
          f"{'cold/warm':>9} {'ssh-only warm s':>16} {'client CPU cold':>16} "
          f"{'warm':>12}  statuses")  # fmt: skip
    for n in args.sizes:
        r = run_size(n, args)
        warm = r["warm_s"]
        print(
            f"{n:>6} {r['cold_s']:>8.2f} {n / r['cold_s']:>8.0f} {warm:>8.2f} {n / warm:>8.0f} "
            f"{r['cold_s'] / warm:>9.1f} {r['warm_ssh_only_s']:>16.2f} "
            f"{r['cold_cpu_s']:>6.2f} s {1000 * r['cold_cpu_s'] / n:>4.1f} ms/h "
            f"{r['warm_cpu_s']:>4.2f} s {1000 * r['warm_cpu_s'] / n:>4.1f} ms/h  {r['statuses']} "
            f"({r['database']})"
        )


if __name__ == "__main__":
    main()
