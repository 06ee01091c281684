"""What the benchmarks share: a scratch PostgreSQL database, Django on it, the processes they
start (a simulated fleet, Celery, gunicorn), and the clocks and counters they read.

A script imports it before any app (`import scaffold`): importing it puts the checkout on
sys.path, as manage.py would. Nothing here measures; each script keeps what it measures.

Run as a script it is one slice of a simulated fleet (`start_sim_slices` starts it so).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.test import Client

    from hosts.models import Host, StateSnapshot

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the apps import from the checkout, as under manage.py

DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/controlplane"
CLK_TCK = os.sysconf("SC_CLK_TCK")
SIM_BASE_PORT = 20001
HOSTS_PER_SIM = 2500


def parser_for(doc: str) -> argparse.ArgumentParser:
    """Options of a script whose --help is its whole docstring, laid out as written."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)


# --- the scratch database ------------------------------------------------------------------


def scratch_url(url: str, name: str) -> str:
    """The database `name` on the server `url` names (the benchmarks never touch url's own)."""
    parts = urlsplit(url)
    if not parts.scheme.startswith("postgres"):
        raise SystemExit("the database URL must point at PostgreSQL: the benchmark is about it")
    return urlunsplit(parts._replace(path=f"/{name}"))


def recreate_database(url: str, *, force: bool = False) -> None:
    """Drop and create the database `url` names, from the server's maintenance database.
    `force` ends the sessions still open on it (a previous run's fleet closing its own)."""
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    maintenance = urlunsplit(urlsplit(url)._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"' + (" WITH (FORCE)" if force else ""))
        conn.execute(f'CREATE DATABASE "{name}"')


def fresh_database(url: str, name: str, *, reuse: bool = False, force: bool = False) -> str:
    """The URL of the scratch database `name` next to `url`'s, empty unless `reuse`."""
    scratch = scratch_url(url, name)
    if not reuse:
        recreate_database(scratch, force=force)
    return scratch


def fresh_checkpoints(path: Path) -> Path:
    """An empty audit checkpoint folder: checkpoints signed for an earlier database would
    fail this one's verification."""
    shutil.rmtree(path, ignore_errors=True)
    return path


# --- Django --------------------------------------------------------------------------------


def django_setup(db_url: str | None = None) -> None:
    """Django in this process, on `db_url` (default: DATABASE_URL as the environment has it)."""
    if db_url is not None:
        os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()


def migrate() -> None:
    """Migrate the database this process's Django is on."""
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def manage_argv(*args: str) -> list[str]:
    """`manage.py ARGS` with this interpreter; run it with cwd=ROOT."""
    return [sys.executable, "manage.py", *args]


def migrate_in_child(env: dict[str, str]) -> None:
    """Migrate the database env's DATABASE_URL names, in a `manage.py migrate` of its own."""
    subprocess.run(manage_argv("migrate", "-v0"), cwd=ROOT, env=env, check=True)


def bench_user(username: str, *roles: str, password: str | None = None) -> User:
    """The benchmark's person, made on first use with `roles` (both audited, as for anyone)."""
    from django.contrib.auth.models import User

    from controlplane.accounts.roles import ensure_role_groups

    user = User.objects.filter(username=username).first()
    if user is None:
        user = User(username=username)
        if password is not None:
            user.set_password(password)
        user.save()
        groups = ensure_role_groups()
        user.groups.add(*(groups[role] for role in roles))
    return user


def signed_in_client(user: User) -> Client:
    """Django's test client signed in as `user`: the whole stack in this process."""
    from django.conf import settings
    from django.test import Client

    settings.ALLOWED_HOSTS = ["*"]  # the test client's "testserver", whatever the env allows
    client = Client()
    client.force_login(user)
    return client


def ok_snapshot(
    host: Host, taken_at: Any, *, duration_ms: int, parsed: dict[str, Any], digest: str
) -> StateSnapshot:
    """An unsaved snapshot of a scheduled probe that answered, for bulk_create."""
    from hosts.models import StateSnapshot

    return StateSnapshot(
        host=host,
        taken_at=taken_at,
        status="ok",
        trigger="schedule",
        duration_ms=duration_ms,
        parsed=parsed,
        digest=digest,
    )


# --- processes -----------------------------------------------------------------------------


def wait_for(
    cond: Callable[[], bool],
    timeout: float,
    what: str,
    proc: subprocess.Popen[bytes] | None = None,
) -> None:
    """Poll `cond` until true; give up when `proc` (what makes it true) exits, or at timeout."""
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def start_logged(argv: list[str], env: dict[str, str] | None, log: Path) -> subprocess.Popen[bytes]:
    """A child in the checkout, its output and errors in `log`."""
    with open(log, "wb") as out:  # the child has its own copy of the file
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """SIGTERM, so that it closes cleanly; killed if it has not ended by `timeout`."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def stop_all(procs: Iterable[subprocess.Popen[bytes]], timeout: float = 30) -> None:
    """Stop every one, signalled together so that their shutdowns overlap."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        stop(proc, timeout)


def run_queue(prefix: str) -> str:
    """A Celery queue of this run's own: no other run's worker takes its tasks."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


CELERY = [sys.executable, "-m", "celery", "-A", "controlplane"]


def celery_worker_argv(name: str, queue: str, threads: int) -> list[str]:
    """A worker as ARCHITECTURE.md runs probe workers: the threads pool, quiet, no gossip."""
    return [*CELERY, "worker", "-P", "threads", "-c", str(threads), "-n", f"{name}@%h",
            "-Q", queue, "-l", "warning", "--without-gossip", "--without-mingle"]  # fmt: skip


def celery_beat_argv(schedule: Path) -> list[str]:
    """Beat with the product's schedule, its state in `schedule`."""
    return [*CELERY, "beat", "-l", "warning", "-s", str(schedule)]


def gunicorn_argv(port: int, workers: int, access_log: Path, log_format: str) -> list[str]:
    """The product's WSGI app as the Dockerfile serves it (sync workers), on 127.0.0.1."""
    return [sys.executable, "-m", "gunicorn", "controlplane.wsgi", "--bind",
            f"127.0.0.1:{port}", "--workers", str(workers), "--access-logfile",
            str(access_log), "--access-logformat", log_format]  # fmt: skip


def log_size(path: Path) -> int:
    """Where a log ends now: read from here to see only what comes after."""
    return path.stat().st_size if path.exists() else 0


def lines_after(path: Path, mark: int) -> list[str]:
    """The lines a log gained since `mark` (a `log_size`)."""
    with path.open() as fh:
        fh.seek(mark)
        return fh.read().splitlines()


# --- simulated fleets ----------------------------------------------------------------------


def start_simfleet(
    hosts: int, base_port: int, state_dir: Path, log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """`manage.py simfleet --register` in a process of its own (as a real fleet would not
    share the client's interpreter), returned once it listens."""
    argv = manage_argv("simfleet", "--hosts", str(hosts), "--base-port", str(base_port),
                       "--register", "--state-dir", str(state_dir))  # fmt: skip
    fleet = start_logged(argv, env, log)
    try:
        wait_for(lambda: "listening" in log.read_text(), 600, "the simulated fleet", fleet)
    except BaseException:
        stop(fleet)
        # the log may be in a temporary folder about to go: show why it did not come up
        print(log.read_text()[-3000:], file=sys.stderr)
        raise
    return fleet


def sim_slices_for(hosts: int) -> int:
    """One simulator process per 2,500 hosts: each keeps its hosts' ports below the ephemeral
    range on a loopback address of its own."""
    return max(1, -(-hosts // HOSTS_PER_SIM))


def start_sim_slices(hosts: int, procs: int, state: Path) -> list[subprocess.Popen[bytes]]:
    """`procs` simulator processes (simulator.server.SimFleet), slice k on 127.0.10.k+1 from
    port SIM_BASE_PORT, each writing state/sim{k}.json once it listens."""
    from simulator.server import host_names

    names = host_names(hosts)
    per = -(-hosts // procs)
    children = []
    for k in range(procs):
        (state / f"sim{k}.json").unlink(missing_ok=True)
        chunk = names[k * per : (k + 1) * per]
        child = subprocess.Popen(
            [sys.executable, __file__, str(k), f"127.0.10.{k + 1}", ",".join(chunk), str(state)],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        children.append(child)
        if k == 0:  # the first writes the shared client key; the others read it
            wait_for((state / "fleet" / "client_ed25519").exists, 60, "client key")
    for k, child in enumerate(children):
        wait_for((state / f"sim{k}.json").exists, 300, f"simulator {k}", child)
    return children


def register_sim_slices(procs: int, state: Path) -> int:
    """Register every slice's hosts with the function `simfleet --register` uses."""
    from deployments.simfleet_registration import register_fleet
    from simulator.ssh_host import SimHostInfo

    key = (state / "fleet" / "client_ed25519").read_text()
    total = 0
    for k in range(procs):
        spec = json.loads((state / f"sim{k}.json").read_text())
        infos = [SimHostInfo(h["name"], h["port"], h["public_key"]) for h in spec["hosts"]]
        for start in range(0, len(infos), 500):
            total += len(register_fleet(infos[start : start + 500], client_private_key=key,
                                        address=spec["bind"]))  # fmt: skip
    return total


def serve_sim_slice(index: int, names: list[str], bind: str, state: Path) -> None:
    """One slice of the fleet, until SIGTERM; its hosts' keys in state/sim{index}.json."""
    import asyncio

    from simulator.server import SimFleet

    fleet = SimFleet(len(names), names=names, base_port=SIM_BASE_PORT, bind=bind,
                     state_dir=state / "fleet", load_seconds=0.2)  # fmt: skip
    info = [{"name": i.name, "port": i.port, "public_key": i.public_key}
            for i in fleet.registration_info()]  # fmt: skip

    async def serve() -> None:
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopped.set)
        await fleet.start()
        (state / f"sim{index}.json").write_text(json.dumps({"bind": bind, "hosts": info}))
        await stopped.wait()
        await fleet.stop()

    asyncio.run(serve())


# --- clocks and counters -------------------------------------------------------------------


def median_ms(fn: Callable[[], Any], runs: int) -> float:
    """Median wall time of `runs` calls, in ms, after one untimed call (connections opened,
    templates loaded, plans cached, pages in shared buffers)."""
    fn()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def pct(values: list[float], p: float) -> float:
    """The p-th percentile, nearest rank."""
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, as /proc/loadavg has them."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields) - idle) / CLK_TCK, sum(fields) / CLK_TCK


def postgres_cpu() -> float:
    """CPU seconds of the whole PostgreSQL server (every database) since it started: the
    postmaster's own and its reaped backends' (cutime, cstime), plus the live backends'."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if Path(entry, "comm").read_text().strip() != "postgres":
                continue
            stat = Path(entry, "stat").read_text().rsplit(")", 1)[1].split()
            total += (int(stat[11]) + int(stat[12])) / CLK_TCK
            if stat[1] == "1" or Path(entry, "cmdline").read_bytes().startswith(b"/usr/lib"):
                total += (int(stat[13]) + int(stat[14])) / CLK_TCK  # children reaped
        except (OSError, IndexError):
            continue
    return total


if __name__ == "__main__":
    # start_sim_slices' child: INDEX BIND NAMES STATE
    index, bind, names, state = sys.argv[1:5]
    serve_sim_slice(int(index), names.split(","), bind, Path(state))
