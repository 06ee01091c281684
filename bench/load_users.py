#!/usr/bin/env python
"""Fifty signed-in users on the real web server while a fleet is probed and changes run.

    .venv/bin/python bench/load_users.py --database postgres://postgres@127.0.0.1:5432/controlplane
    # options: --users 50 --hosts 500 --minutes 5 --dwell 10 --operators 3 --approvers 2
    #          --change-every 15 --approve-every 10 --server-workers 3

What runs, all real and all on this machine:
- a fresh PostgreSQL database (`controlplane_load_bench`), migrated;
- `manage.py simfleet --hosts N --register` in a process of its own (ports from 24001);
- one Celery worker (`-P threads -c 4`, the probe worker ARCHITECTURE.md describes, which also
  runs the change jobs) and Celery beat with the product's schedule (a probe sweep every
  PROBE_SWEEP_SECONDS, each host every 60 s), on a queue of this run's own;
- gunicorn as the Dockerfile runs it (`--workers 3`, sync), on a free port of 127.0.0.1.

The load, from this process (threads with urllib, one cookie jar per user):
- `--users` viewers sign in through the login form (CSRF token and all), then browse: each
  opens a page (fleet, fleet filtered or paged, a host page, approvals, changes, a change,
  audit history, a host's audit history), stays on it an exponential `--dwell` seconds and
  meanwhile polls as the page's htmx does (the fleet's rows every 15 s; an unfinished change's
  live fragment every second, until the server answers 286), then opens the next;
- `--operators` operators, each with a personal API token, request restarts (and one in four
  a model swap to the other Kimi-K2.5 build) on the host's latest snapshot through
  `POST /api/v1/changes/`, one every exponential `--change-every` seconds each;
- `--approvers` approvers, with tokens too, list the swaps waiting and approve each on the
  host's latest snapshot (`POST /api/v1/changes/<id>/approve/`).

Measured after a warm-up (the fleet's first, cold round): every request's time at the client
(what a user waits, queueing in gunicorn's backlog included) and at the server (gunicorn's
`%(D)s`). An error is a failed request or any status that is not 2xx/3xx, except the API's
409 refusals (a stale snapshot, another job on the host, a swap already decided), which are
the rules working and are counted apart. Then the load stops, open jobs are given
`--drain` seconds to end, worker and beat stop, and what the load did is compared with the
audit log: sign-ins, change requests, approvals, job starts, steps and ends, and every probe
the product's rule says is audited (every asked-for probe; a scheduled one when the host's
status or material fingerprint moved); then `manage.py verify_audit` runs.
"""

from __future__ import annotations

import argparse
import contextlib
import http.cookiejar
import json
import os
import random
import re
import socket
import statistics
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import scaffold
from scaffold import CLK_TCK, loadavg, machine_busy, pct, postgres_cpu

STATE = scaffold.ROOT / ".run" / "bench-load"
DB_NAME = "controlplane_load_bench"
BASE_PORT = 24001
PASSWORD = "load-bench-password-1"
ACCESS_FORMAT = "%(t)s %(m)s %(U)s?%(q)s %(s)s %(D)s"  # server_times: the last three
FINAL = ("rejected", "succeeded", "failed", "rolled_back", "drifted", "cancelled", "interrupted")
ENDS = {f"change.{s}" for s in FINAL if s != "rejected"}


# --- measurements -----------------------------------------------------------------------


@dataclass
class Tally:
    """Every request the load sent, by page or API call, with what came back."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    times: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    refused: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    measuring: bool = False

    def add(self, name: str, seconds: float) -> None:
        if self.measuring:
            with self.lock:
                self.times[name].append(seconds)

    def error(self, name: str, what: str) -> None:
        with self.lock:
            self.errors[name].append(what)

    def refusal(self, name: str, code: str) -> None:
        with self.lock:
            self.refused[name][code] = self.refused[name].get(code, 0) + 1

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1


def proc_cpu(pid: int) -> float:
    """CPU seconds of a process and of its children it has reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in stat[11:15]) / CLK_TCK


def tree_cpu(root: int) -> float:
    """CPU seconds of a process and its live descendants (gunicorn's workers, celery's)."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                ppid = int(Path(entry, "stat").read_text().rsplit(")", 1)[1].split()[1])
                children[ppid].append(int(entry.name))
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += proc_cpu(pid)
        todo += children.get(pid, [])
    return total


# --- the control plane ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def people(args: argparse.Namespace) -> dict:
    """The users: viewers with passwords, operators and approvers with personal tokens."""
    from controlplane.accounts.roles import APPROVER, OPERATOR, VIEWER
    from controlplane.api.services import token_create
    from controlplane.audit.context import acting

    def user(name: str, *roles: str) -> Any:
        return scaffold.bench_user(name, *roles, password=PASSWORD)

    with acting("system:cli"):
        viewers = [user(f"load-viewer-{i:02d}", VIEWER).username for i in range(args.users)]
        operators = [
            token_create(user=user(f"load-operator-{i}", VIEWER, OPERATOR), name="load").secret
            for i in range(args.operators)
        ]
        approvers = [
            token_create(user=user(f"load-approver-{i}", VIEWER, APPROVER), name="load").secret
            for i in range(args.approvers)
        ]
    return {"viewers": viewers, "operators": operators, "approvers": approvers}


def fleet_rows() -> dict:
    """What operators know before they start: each host's deployment, the two Kimi builds."""
    from deployments.models import Deployment, ModelArtifact

    deployments = {d.host.name: d.pk for d in Deployment.objects.select_related("host")}
    kimi = {
        m.variant: m.pk
        for m in ModelArtifact.objects.filter(
            name="moonshotai/Kimi-K2.5", variant__in=["NVFP4", "INT4"]
        )
    }
    return {"deployments": deployments, "kimi": kimi}


# --- the clients ------------------------------------------------------------------------


class Browser:
    """One person's browser: a cookie jar, the CSRF token, and the pages it opens."""

    def __init__(self, base: str, tally: Tally) -> None:
        self.base = base
        self.tally = tally
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, name: str, path: str, *, htmx: bool = False) -> tuple[int, str]:
        headers = {"HX-Request": "true"} if htmx else {}
        request = urllib.request.Request(self.base + path, headers=headers)
        started = time.perf_counter()
        try:
            with self.opener.open(request, timeout=30) as response:
                body = response.read().decode()
                status = response.status
        except urllib.error.HTTPError as exc:
            exc.read()
            status, body = exc.code, ""
        except OSError as exc:
            self.tally.error(name, f"{type(exc).__name__}: {exc}")
            return 0, ""
        took = time.perf_counter() - started
        if 200 <= status < 400:
            self.tally.add(name, took)
        else:
            self.tally.error(name, f"HTTP {status} {path}")
        return status, body

    def sign_in(self, username: str) -> bool:
        _, page = self.get("sign-in form", "/login/")
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        if not match:
            self.tally.error("sign in", "no CSRF token on the login page")
            return False
        body = urllib.parse.urlencode(
            {"username": username, "password": PASSWORD, "csrfmiddlewaretoken": match[1]}
        ).encode()
        request = urllib.request.Request(self.base + "/login/", data=body)
        started = time.perf_counter()
        try:
            with self.opener.open(request, timeout=60) as response:
                response.read()
                ok = response.status == 200 and response.url.rstrip("/") == self.base
        except (urllib.error.HTTPError, OSError) as exc:
            self.tally.error("sign in", f"{username}: {exc}")
            return False
        self.tally.times["sign in"].append(time.perf_counter() - started)
        if not ok:
            self.tally.error("sign in", f"{username}: not signed in")
        return ok


class Api:
    """An operator's or approver's JSON client with a personal token."""

    def __init__(self, base: str, token: str, tally: Tally) -> None:
        self.base = base
        self.token = token
        self.tally = tally

    def call(self, name: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base + path, data=data, headers=headers)
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except OSError as exc:
            self.tally.error(name, f"{type(exc).__name__}: {exc}")
            return 0, {}
        took = time.perf_counter() - started
        try:
            payload = json.loads(raw) if raw else {}
        except ValueError:
            payload = {}
        if 200 <= status < 400:
            self.tally.add(name, took)
        elif status == 409:
            self.tally.add(name, took)
            self.tally.refusal(name, str(payload.get("code", "409")))
        else:
            self.tally.error(name, f"HTTP {status} {path} {raw[:200]!r}")
        return status, payload


PAGES = [  # (weight, name)
    (20, "fleet"),
    (5, "fleet, filtered or paged"),
    (25, "host page"),
    (10, "approvals"),
    (10, "changes"),
    (15, "change page"),
    (10, "audit history"),
    (5, "audit history of a host"),
]


def browse(
    base: str,
    username: str,
    hosts: list[str],
    changes: list[int],
    tally: Tally,
    deadline: float,
    dwell: float,
    signed_in: threading.Barrier,
) -> None:
    browser = Browser(base, tally)
    if browser.sign_in(username):
        tally.count("sign-ins")
    with contextlib.suppress(threading.BrokenBarrierError):
        signed_in.wait()
    names = [n for _, n in PAGES]
    weights = [w for w, _ in PAGES]
    rng = random.Random(username)
    time.sleep(rng.uniform(0, dwell))
    while time.monotonic() < deadline:
        page = rng.choices(names, weights)[0]
        poll: tuple[str, str, float] | None = None
        if page == "fleet":
            path, poll = "/", ("fleet rows (htmx, every 15 s)", "/hosts/rows/", 15.0)
        elif page == "fleet, filtered or paged":
            path = rng.choice(["/?page=2", "/?sort=age", "/?verdict=degraded", "/?q=gpu-1"])
        elif page == "host page":
            path = f"/hosts/{rng.choice(hosts)}/"
        elif page == "approvals":
            path = "/approvals/"
        elif page == "changes":
            path = "/changes/"
        elif page == "change page":
            recent = changes[-20:]
            path = f"/changes/{rng.choice(recent)}/" if recent else "/changes/"
        elif page == "audit history":
            path = "/audit/"
        else:
            path = f"/audit/?host={rng.choice(hosts)}"
        status, body = browser.get(page, path)
        if page == "change page" and 'hx-trigger="every 1s"' in body:
            poll = ("change page live fragment (htmx, every 1 s)", f"{path}?fragment=live", 1.0)
        stay = min(rng.expovariate(1 / dwell), deadline - time.monotonic())
        leave = time.monotonic() + max(0.0, stay)
        while poll is not None and time.monotonic() + poll[2] < leave:
            time.sleep(poll[2])
            status, _ = browser.get(poll[0], poll[1], htmx=True)
            if status == 286:  # htmx: stop polling (the change has finished)
                poll = None
        time.sleep(max(0.0, leave - time.monotonic()))


def operate(
    base: str,
    token: str,
    fleet: dict,
    changes: list[int],
    tally: Tally,
    deadline: float,
    every: float,
    seed: int,
) -> None:
    api = Api(base, token, tally)
    rng = random.Random(seed)
    hosts = sorted(fleet["deployments"])
    by_pk = {v: k for k, v in fleet["kimi"].items()}
    while True:
        # never past the deadline: the window ends when the last client stops
        time.sleep(max(0.0, min(rng.expovariate(1 / every), deadline - time.monotonic())))
        if time.monotonic() >= deadline:
            return
        host = rng.choice(hosts)
        status, snap = api.call(
            "API: host's latest snapshot", f"/api/v1/hosts/{host}/snapshots/latest/"
        )
        if status != 200:
            continue
        deployment = fleet["deployments"][host]
        body = {
            "deployment_id": deployment,
            "kind": "restart",
            "snapshot_id": snap["id"],
            "reason": "apply the patched engine",
            "acknowledge_busy": True,
        }
        if rng.random() < 0.25:
            status, dep = api.call("API: deployment", f"/api/v1/deployments/{deployment}/")
            if status != 200:
                continue
            current = by_pk.get((dep.get("model") or {}).get("id"))
            other = "INT4" if current != "INT4" else "NVFP4"
            body.update(kind="model_swap", model_id=fleet["kimi"][other],
                        reason=f"swap to the {other} build")  # fmt: skip
        status, made = api.call(
            f"API: request a {body['kind'].replace('_', ' ')}", "/api/v1/changes/", body
        )
        if status == 201:
            tally.count(f"changes requested ({body['kind']})")
            changes.append(int(made["id"]))


def approve(base: str, token: str, tally: Tally, deadline: float, every: float, seed: int) -> None:
    api = Api(base, token, tally)
    rng = random.Random(seed)
    while True:
        # never past the deadline: the window ends when the last client stops
        time.sleep(max(0.0, min(rng.expovariate(1 / every), deadline - time.monotonic())))
        if time.monotonic() >= deadline:
            return
        status, page = api.call("API: changes waiting", "/api/v1/changes/?status=pending_approval")
        if status != 200:
            continue
        waiting = page.get("results", [])
        rng.shuffle(waiting)
        for change in waiting[:3]:
            status, snap = api.call(
                "API: host's latest snapshot", f"/api/v1/hosts/{change['host']}/snapshots/latest/"
            )
            if status != 200:
                continue
            status, _ = api.call(
                "API: approve a swap",
                f"/api/v1/changes/{change['id']}/approve/",
                {"snapshot_id": snap["id"], "reason": "reviewed the snapshot, fits"},
            )
            if status == 200:
                tally.count("approvals")


# --- what the audit log says --------------------------------------------------------------


def audit_check(tally: Tally) -> list[tuple[str, int, int, int]]:
    """(what, done according to the rows and the load, audit events found, missing), over
    the whole database: it was created for this run, so every row is the load's or the
    fleet's registration."""
    from django.contrib.auth.models import User

    from controlplane.audit.models import AuditEvent
    from deployments.models import Approval, ChangeRequest, JobStep
    from hosts.models import StateSnapshot
    from hosts.services.probing import material_digest

    rows: list[tuple[str, int, int, int]] = []
    events = AuditEvent.objects.all()

    viewers = set(
        User.objects.filter(username__startswith="load-viewer-").values_list("pk", flat=True)
    )
    logins = events.filter(action="auth.login", actor_user_id__in=viewers).count()
    rows.append(("sign-ins (client saw a session)", tally.counts["sign-ins"], logins,
                 max(0, tally.counts["sign-ins"] - logins)))  # fmt: skip

    changes = ChangeRequest.objects.all()
    ids = {str(pk) for pk in changes.values_list("pk", flat=True)}
    change_events = events.filter(target_type="deployments.changerequest")
    requested = set(
        change_events.filter(action="change.requested").values_list("target_id", flat=True)
    )
    made = sum(v for k, v in tally.counts.items() if k.startswith("changes requested"))
    rows.append((f"change requests (client got 201: {made})", len(ids), len(requested & ids),
                 len(ids - requested)))  # fmt: skip

    approvals = Approval.objects.filter(change__in=changes, decision="approved")
    approved = {str(a.change_id) for a in approvals}
    approval_events = set(
        change_events.filter(action="change.approved").values_list("target_id", flat=True)
    )
    rows.append((f"approvals (client got 200: {tally.counts['approvals']})", len(approved),
                 len(approved & approval_events), len(approved - approval_events)))  # fmt: skip

    started = {
        str(pk) for pk in changes.filter(started_at__isnull=False).values_list("pk", flat=True)
    }
    start_events = set(
        change_events.filter(action="change.started").values_list("target_id", flat=True)
    )
    rows.append(("jobs started", len(started), len(started & start_events),
                 len(started - start_events)))  # fmt: skip

    ended = {
        str(pk)
        for pk in changes.filter(status__in=FINAL)
        .exclude(status="rejected")
        .values_list("pk", flat=True)
    }
    end_events: dict[str, int] = defaultdict(int)
    for target in change_events.filter(action__in=ENDS).values_list("target_id", flat=True):
        end_events[target] += 1
    doubled = sum(1 for t in ended if end_events.get(t, 0) > 1)
    rows.append((f"jobs ended (more than one end event: {doubled})", len(ended),
                 len(ended & set(end_events)), len(ended - set(end_events))))  # fmt: skip

    steps = {
        (str(c), s)
        for c, s in JobStep.objects.filter(
            change__in=changes, finished_at__isnull=False
        ).values_list("change_id", "seq")
    }
    step_events = {
        (t, int(d.get("step", -1)))
        for t, d in change_events.filter(action="change.step").values_list("target_id", "data")
    }
    rows.append(
        ("job steps finished", len(steps), len(steps & step_events), len(steps - step_events))
    )

    # Probes: every asked-for one is audited; a scheduled one when status or material moved
    # from the host's previous snapshot (hosts.services.probing.snapshots_record).
    probe_events = set(
        events.filter(action="probe.completed").values_list("snapshot_id", flat=True)
    )
    last: dict[int, tuple[str, str]] = {}
    must_manual: set[int] = set()
    must_schedule: set[int] = set()
    scheduled = 0
    for snap in StateSnapshot.objects.order_by("host_id", "pk").only(
        "pk", "host_id", "status", "trigger", "parsed", "taken_at"
    ):
        now = (snap.status, material_digest(snap))
        if snap.trigger != "schedule":
            must_manual.add(snap.pk)
        else:
            scheduled += 1
            if last.get(snap.host_id) != now:
                must_schedule.add(snap.pk)
        last[snap.host_id] = now
    rows.append(("probes asked for (by jobs): snapshots", len(must_manual),
                 len(must_manual & probe_events), len(must_manual - probe_events)))  # fmt: skip
    rows.append((f"scheduled probes whose status or state moved (of {scheduled})",
                 len(must_schedule), len(must_schedule & probe_events),
                 len(must_schedule - probe_events)))  # fmt: skip
    return rows


def snapshot_ages(started_at: float, ended_at: float) -> dict:
    """Scheduled snapshots in the window, and the gaps between a host's consecutive snapshots
    of any trigger (a job's probes count: a reader sees them too)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH s AS (
              SELECT host_id, taken_at, trigger,
                     lag(taken_at) OVER (PARTITION BY host_id ORDER BY taken_at) AS prev
              FROM hosts_statesnapshot
            )
            SELECT count(*) FILTER (WHERE trigger = 'schedule'),
                   max(extract(epoch FROM taken_at - prev)),
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM taken_at - prev)),
                   count(DISTINCT host_id)
            FROM s WHERE taken_at >= to_timestamp(%s) AND taken_at <= to_timestamp(%s)
              AND prev IS NOT NULL
            """,
            [started_at, ended_at],
        )
        n, worst, median, hosts = cursor.fetchone()
    return {
        "snapshots": n,
        "worst_gap": float(worst or 0),
        "median_gap": float(median or 0),
        "hosts": hosts,
    }


# --- the run ------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    checkpoints = scaffold.fresh_checkpoints(STATE / "checkpoints")
    db_url = scaffold.fresh_database(args.database, DB_NAME)
    queue = scaffold.run_queue("load")
    env = dict(os.environ, DATABASE_URL=db_url, CELERY_TASK_DEFAULT_QUEUE=queue,
               LOG_LEVEL="WARNING", AUDIT_CHECKPOINT_DIR=str(checkpoints))  # fmt: skip
    scaffold.migrate_in_child(env)
    scaffold.django_setup(db_url)
    print(f"load average at the start {loadavg()}", flush=True)
    procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        procs[name] = scaffold.start_logged(argv, env, STATE / f"{name}.log")
        return procs[name]

    try:
        procs["fleet"] = scaffold.start_simfleet(
            args.hosts, BASE_PORT, STATE / "fleet", STATE / "fleet.log", env
        )
        who = people(args)
        rows = fleet_rows()
        hosts = sorted(rows["deployments"])
        start("worker", scaffold.celery_worker_argv("load", queue, threads=4))
        time.sleep(6)
        start("beat", scaffold.celery_beat_argv(STATE / "beat-schedule"))
        port = free_port()
        access = STATE / "access.log"
        access.unlink(missing_ok=True)
        web = start("web", scaffold.gunicorn_argv(port, args.server_workers, access, ACCESS_FORMAT))
        base = f"http://127.0.0.1:{port}"

        def answers() -> bool:
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(base + "/login/", timeout=2) as r,
            ):
                return r.status == 200
            return False

        scaffold.wait_for(answers, 60, "gunicorn", web)

        tally = Tally()
        changes: list[int] = []
        warm_end = time.monotonic() + args.warmup
        deadline = warm_end + args.minutes * 60
        signed_in = threading.Barrier(args.users + 1)
        threads = [
            threading.Thread(
                target=browse,
                args=(base, name, hosts, changes, tally, deadline, args.dwell, signed_in),
            )
            for name in who["viewers"]
        ]
        signing_started = time.perf_counter()
        for t in threads:
            t.start()
        with contextlib.suppress(threading.BrokenBarrierError):
            signed_in.wait(timeout=300)
        signing = time.perf_counter() - signing_started
        print(f"{tally.counts['sign-ins']} users signed in in {signing:.1f} s", flush=True)
        threads += [
            threading.Thread(
                target=operate,
                args=(base, tok, rows, changes, tally, deadline, args.change_every, i),
            )
            for i, tok in enumerate(who["operators"])
        ]
        threads += [
            threading.Thread(
                target=approve, args=(base, tok, tally, deadline, args.approve_every, 100 + i)
            )
            for i, tok in enumerate(who["approvers"])
        ]
        # Changes start once the fleet's first, cold round is in: every host has a snapshot.
        time.sleep(max(0.0, warm_end - time.monotonic()))
        for t in threads[args.users :]:
            t.start()
        tally.measuring = True
        window_start = time.time()
        mark = scaffold.log_size(access)
        load0 = loadavg()
        cpu0 = {name: tree_cpu(p.pid) for name, p in procs.items()}
        pg0, me0, busy0 = postgres_cpu(), proc_cpu(os.getpid()), machine_busy()
        print(f"measuring {args.minutes:g} min from load average {load0}", flush=True)
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()) + 60)
        tally.measuring = False
        window_end = time.time()
        window = window_end - window_start
        load1 = loadavg()
        cpu = {name: (tree_cpu(p.pid) - cpu0[name]) / window for name, p in procs.items()}
        cpu["postgres (all its databases)"] = (postgres_cpu() - pg0) / window
        cpu["load client (this process)"] = (proc_cpu(os.getpid()) - me0) / window
        busy1 = machine_busy()
        server = server_times(scaffold.lines_after(access, mark))

        # Drain: open jobs end on their own; waiting approvals stay waiting.
        from deployments.models import ChangeRequest

        drain_until = time.monotonic() + args.drain
        while ChangeRequest.objects.filter(status__in=["queued", "running"]).exists():
            if time.monotonic() > drain_until:
                break
            time.sleep(2)
        still_open = ChangeRequest.objects.filter(status__in=["queued", "running"]).count()
        for name in ("beat", "worker", "web"):
            scaffold.stop(procs.pop(name))
        audit_rows = audit_check(tally)
        ages = snapshot_ages(window_start, window_end)
        statuses = dict(
            ChangeRequest.objects.values_list("status").annotate(n=models_count()).order_by()
        )
        verify = subprocess.run(scaffold.manage_argv("verify_audit"), cwd=scaffold.ROOT,
                                env=env, capture_output=True, text=True)  # fmt: skip
    finally:
        for p in procs.values():
            scaffold.stop(p)

    report(args, tally, server, cpu, (busy1[0] - busy0[0]) / window, load0, load1, window,
           audit_rows, ages, statuses, still_open, verify, signing)  # fmt: skip


def models_count():
    from django.db.models import Count

    return Count("pk")


def page_of(path: str, query: str) -> str:
    """The page name a server log line belongs to, as the clients name them."""
    if path == "/" and query:
        return "fleet, filtered or paged"
    if path == "/":
        return "fleet"
    if path == "/hosts/rows/":
        return "fleet rows (htmx, every 15 s)"
    if path.startswith("/hosts/"):
        return "host page"
    if path == "/approvals/":
        return "approvals"
    if path == "/changes/":
        return "changes"
    if path.startswith("/changes/"):
        return (
            "change page live fragment (htmx, every 1 s)"
            if "fragment=live" in query
            else "change page"
        )
    if path == "/audit/":
        return "audit history of a host" if "host=" in query else "audit history"
    if path == "/api/v1/changes/":
        return "API: changes waiting" if "status=" in query else "API: request a change"
    if path.startswith("/api/v1/changes/"):
        return "API: approve a swap"
    if path.startswith("/api/v1/hosts/"):
        return "API: host's latest snapshot"
    if path.startswith("/api/v1/deployments/"):
        return "API: deployment"
    return path


def server_times(lines: list[str]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for line in lines:
        parts = line.split()
        if len(parts) < 5:
            continue
        path, _, query = parts[-3].partition("?")
        out[page_of(path, query)].append(int(parts[-1]) / 1000)
    return out


def report(args, tally, server, cpu, busy, load0, load1, window, audit_rows, ages, statuses,
           still_open, verify, signing) -> None:  # fmt: skip
    print(f"\n{args.users} signed-in users (dwell {args.dwell:g} s, exponential), "
          f"{args.operators} operators and {args.approvers} approvers on the JSON API; "
          f"{args.hosts} simulated hosts probed every 60 s by one Celery worker (threads, 4) "
          f"and beat; gunicorn {args.server_workers} sync workers; PostgreSQL; measured "
          f"{window / 60:.1f} min after {args.warmup:g} s of warm-up")  # fmt: skip
    print(f"load average (1, 5, 15 min) at the window's start {load0}, at its end {load1}")
    print(f"{len(tally.times['sign in'])} sign-ins before the window took {signing:.1f} s "
          f"(median {statistics.median(tally.times['sign in']) * 1000:.0f} ms each)"
          if tally.times["sign in"] else "no sign-ins")  # fmt: skip
    print(f"\n{'page or call':<46} {'requests':>8} {'errors':>6} {'409s':>5} "
          f"{'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'server p50':>10} {'p95':>6}")  # fmt: skip
    names = [n for _, n in PAGES] + [
        "fleet rows (htmx, every 15 s)", "change page live fragment (htmx, every 1 s)",
        "API: host's latest snapshot", "API: deployment", "API: request a restart",
        "API: request a model swap", "API: changes waiting", "API: approve a swap"]  # fmt: skip
    every: list[float] = []
    for name in names:
        t = tally.times.get(name, [])
        errors = len(tally.errors.get(name, []))
        refused = sum(tally.refused.get(name, {}).values())
        key = "API: request a change" if name.startswith("API: request a") else name
        s = server.get(key, [])
        if not t and not errors:
            continue
        every += t
        row = f"{name:<46} {len(t):>8} {errors:>6} {refused:>5} "
        row += (
            f"{pct(t, 50) * 1000:>7.0f} {pct(t, 95) * 1000:>7.0f} {pct(t, 99) * 1000:>7.0f} "
            if t
            else " " * 24
        )
        row += f"{pct(s, 50):>10.0f} {pct(s, 95):>6.0f}" if s else ""
        print(row)
    all_errors = sum(len(v) for v in tally.errors.values())
    print(f"{'all requests':<46} {len(every):>8} {all_errors:>6} "
          f"{sum(sum(v.values()) for v in tally.refused.values()):>5} "
          f"{pct(every, 50) * 1000:>7.0f} "
          f"{pct(every, 95) * 1000:>7.0f} {pct(every, 99) * 1000:>7.0f}"
          f"   ({len(every) / window:.1f} requests/s)")  # fmt: skip
    print("(server p50/p95 of 'API: request a ...' are for both kinds together)")
    for name, errs in tally.errors.items():
        print(f"errors on {name}: {len(errs)}, e.g. {errs[:3]}")
    for name, codes in tally.refused.items():
        print(f"409 refusals on {name}: {codes}")
    print("\nCPU, cores over the window: " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
          + f"; the whole machine {busy:.2f} of {os.cpu_count()}")  # fmt: skip
    print(
        f"scheduled probes in the window: {ages['snapshots']} snapshots; gap between "
        f"consecutive snapshots of a host (any trigger) median {ages['median_gap']:.1f} s, "
        f"worst {ages['worst_gap']:.1f} s ({ages['hosts']} hosts)"
    )
    print(f"changes by status at the end: {statuses}; still queued or running after "
          f"{args.drain:g} s of drain: {still_open}")  # fmt: skip
    print(f"\n{'what the load did':<62} {'rows':>6} {'audited':>8} {'lost':>5}")
    lost = 0
    for what, done, found, missing in audit_rows:
        lost += missing
        print(f"{what:<62} {done:>6} {found:>8} {missing:>5}")
    print(f"{'audit events lost':<62} {'':>6} {'':>8} {lost:>5}")
    print(
        f"verify_audit: exit {verify.returncode}: {(verify.stdout + verify.stderr).strip()[-300:]}"
    )


def main() -> None:
    parser = scaffold.parser_for(__doc__)
    parser.add_argument("--database", default=scaffold.DEFAULT_DATABASE)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--hosts", type=int, default=500)
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--warmup", type=float, default=75, help="seconds before measuring")
    parser.add_argument("--dwell", type=float, default=10, help="mean seconds on a page")
    parser.add_argument("--operators", type=int, default=3)
    parser.add_argument("--approvers", type=int, default=2)
    parser.add_argument("--change-every", type=float, default=15, help="mean s, per operator")
    parser.add_argument("--approve-every", type=float, default=10, help="mean s, per approver")
    parser.add_argument("--server-workers", type=int, default=3)
    parser.add_argument("--drain", type=float, default=180, help="s for open jobs to end")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
