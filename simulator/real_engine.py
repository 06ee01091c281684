"""A simulated host whose units run a real `vllm serve`: systemd and the GPUs stay simulated,
the engine and everything it answers are the real thing.

`attach(machine, RealEngine(...))` flags a host. From then on, a vLLM unit that systemd starts
on it (`systemctl start` / `restart`, Restart=) runs the real server with the unit's own
ExecStart= arguments, the binary and the model paths mapped to the ones given (a host's
`/models/...` to a local directory), the port to a free one on this machine and the bind
address to loopback; its environment is the unit's (Environment=, EnvironmentFile=: an API key
as `VLLM_API_KEY` reaches the engine as the unit gives it) over the base environment given.
The unit is `active (running)` from the spawn on, while the engine loads (vLLM 0.32 has no
listening socket then: curl on the host is refused), and `failed` once the process exits on its
own; `systemctl stop` stops it (SIGTERM to its process group, then SIGKILL) and waits for it.
What the process prints goes to the unit's journal as it prints it.

`curl` on the host (simulator.tools.curl) and loopback URLs in scripts the host runs
(simulator.tools.scripts, the serving benchmark) reach the real server when they name the
unit's port; anything else on the host answers as before. The hooks in the state layer
(simulator.state.lifecycle: spawn, stop, settle), `simulator.http.request` and the scripts'
URL rewriting are one call each into
this module, which does nothing for a host that is not attached.

A test tool, like the rest of the simulator: it runs whatever `vllm` it is given.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .http.completions import Pending
from .http.responses import Response

if TYPE_CHECKING:
    from .state import Machine, Run, Unit

LOCAL_HOSTS = {"127.0.0.1", "localhost", "0.0.0.0", "::1", "[::1]"}  # noqa: S104 - a URL, not a bind
STOP_TIMEOUT = 30.0
EXCHANGE_TIMEOUT = 900.0  # curl's own -m cuts a request short before this
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class RealEngine:
    """What a flagged host runs: `vllm` for the unit's engine binary, `models` for its model
    paths (host path -> local directory), logs under `runtime`, `environment` under the
    unit's own."""

    vllm: Path
    models: dict[str, Path]
    runtime: Path
    environment: dict[str, str] = field(default_factory=dict)
    starts: list[RealProcess] = field(default_factory=list)  # every process started, in order


@dataclass
class RealProcess:
    unit: str
    run: Run
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    argv: list[str]
    started: float = field(default_factory=time.monotonic)
    stopped: float | None = None
    healthy: float | None = None  # when /health first answered 200 through the host's curl
    exited: int | None = None  # its status, once it ended on its own or was stopped
    _offset: int = 0
    _partial: bytes = b""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def new_lines(self) -> list[str]:
        """What it printed since the last call, whole lines only."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._offset)
                data = log.read()
        except OSError:
            return []
        self._offset += len(data)
        data = self._partial + data
        *lines, self._partial = data.split(b"\n")
        return [_ANSI.sub("", line.decode("utf-8", "replace")).rstrip("\r") for line in lines]


_HOSTS: weakref.WeakKeyDictionary[Machine, _Host] = weakref.WeakKeyDictionary()
_ALL: list[RealProcess] = []  # for the exit handler: nothing outlives the test run


@dataclass
class _Host:
    engine: RealEngine
    running: dict[str, RealProcess] = field(default_factory=dict)  # by unit name


def attach(machine: Machine, engine: RealEngine) -> None:
    """From now on, vLLM units this host starts run the real engine."""
    engine.runtime.mkdir(parents=True, exist_ok=True)
    _HOSTS[machine] = _Host(engine)
    for host_path in engine.models:  # the weights are on the host's disk (tiny ones)
        machine.disk.setdefault(host_path, 0.1)


def detach(machine: Machine) -> None:
    """Stop every real process the host runs and forget it."""
    host = _HOSTS.pop(machine, None)
    if host is not None:
        for real in list(host.running.values()):
            _terminate(real)


def process_of(machine: Machine, unit: str) -> RealProcess | None:
    host = _HOSTS.get(machine)
    return host.running.get(unit) if host else None


# --- the hooks ------------------------------------------------------------------------------


def spawn(machine: Machine, unit: Unit, run: Run) -> bool:
    """systemd forked the unit's main process: on a flagged host, a real `vllm serve` (True).
    The run stays loading as far as the simulator knows; the real server answers when it is up."""
    host = _HOSTS.get(machine)
    if host is None or run.engine is None:
        return False
    engine = host.engine
    port = _free_port()
    argv = map_argv(run.argv, engine, port)
    number = len(engine.starts) + 1
    log_path = engine.runtime / f"{unit.name}-{number}.log"
    environ = {**engine.environment, **run.environment}
    with open(log_path, "wb") as log:
        # The test's own vllm, with the unit's arguments.
        process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=environ,
            cwd=engine.runtime,
            start_new_session=True,
        )
    real = RealProcess(unit.name, run, port, process, log_path, argv)
    engine.starts.append(real)
    host.running[unit.name] = real
    _ALL.append(real)
    run.ready_at = None
    return True


def stop(machine: Machine, unit: Unit, run: Run) -> None:
    """`systemctl stop`: the real process goes, and systemd waits for it."""
    host = _HOSTS.get(machine)
    real = host.running.get(unit.name) if host else None
    if host is None or real is None or real.run is not run:
        return
    _terminate(real)
    _pump(machine, unit, real)
    del host.running[unit.name]


def settle(machine: Machine, unit: Unit, run: Run, now: float) -> None:
    """On every read of the host: the process's new output to the journal, and a process that
    exited on its own fails the unit (its own last lines are in the journal already)."""
    host = _HOSTS.get(machine)
    real = host.running.get(unit.name) if host else None
    if host is None or real is None or real.run is not run:
        return
    _pump(machine, unit, real)
    status = real.process.poll()
    if status is None:
        return
    real.exited = status
    _pump(machine, unit, real)
    del host.running[unit.name]
    run.failure, run.fail_at, run.ready_at = "crash", now, None
    run.engine = None  # the simulator adds no failure lines of its own: the real ones are there


def url_for(machine: Machine | None, url_host: str, port: int) -> str | None:
    """Where `http://URL_HOST:PORT` on the host really is (None: not a real server's port)."""
    real = _target(machine, url_host, port)
    return real.base_url if real else None


def forwarded(
    machine: Machine, method: str, url: str, headers: dict[str, str], body: str | None
) -> tuple[Response | Pending | None, str, int] | None:
    """curl on the host to a real server's port, as `simulator.http.request` answers it: the
    exchange, pending until the real server answered (curl's -m bounds it), or curl's error
    when nothing listens there (a loading vLLM). None: not a real server's port."""
    if machine not in _HOSTS:
        return None
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        port = parts.port or 80
    except ValueError:
        return None
    host = parts.hostname or ""
    real = _target(machine, host, port) if parts.scheme == "http" else None
    if real is None:
        return None
    try:
        socket.create_connection(("127.0.0.1", real.port), timeout=2).close()
    except OSError:  # refused: the server has no listening socket (yet, or any more)
        said = f"Failed to connect to {host} port {port} after 0 ms: Couldn't connect to server"
        return None, said, 7
    target = real.base_url + (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Exchange(real, method, target, headers, body), "", 0


class _Exchange(Pending):
    """A request to the real server, sent when curl awaits it (off the event loop)."""

    def __init__(
        self, real: RealProcess, method: str, url: str, headers: dict[str, str], body: str | None
    ) -> None:  # not the simulated Pending's fields: curl only awaits `complete`
        self.real = real
        self.method, self.url, self.headers, self.body = method, url, headers, body

    async def complete(self) -> Response | None:
        try:
            response = await asyncio.to_thread(
                _exchange, self.method, self.url, self.headers, self.body
            )
        except (OSError, ConnectionError):  # reset, or the server died while answering
            return None
        if self.real.healthy is None and response.status == 200 and self.url.endswith("/health"):
            self.real.healthy = time.monotonic()
        return response


# --- the parts ------------------------------------------------------------------------------


def map_argv(argv: Sequence[str], engine: RealEngine, port: int) -> list[str]:
    """The unit's command line as this machine runs it: the binary, model paths, port and bind
    address mapped; every other argument as the unit gives it."""
    out = [str(engine.vllm)]
    models = {path.rstrip("/"): str(local) for path, local in engine.models.items()}
    bound = False
    args = iter(argv[1:])
    for arg in args:
        name, eq, _ = arg.partition("=")
        if name in ("--port", "--host"):
            if not eq:
                next(args, "")  # its value, replaced
            out += [name, str(port) if name == "--port" else "127.0.0.1"]
            bound = bound or name == "--host"
            continue
        out.append(models.get(arg.rstrip("/"), arg))
    if "--port" not in out:
        out += ["--port", str(port)]
    if not bound:
        out += ["--host", "127.0.0.1"]  # vLLM binds every interface otherwise
    return out


def _target(machine: Machine | None, url_host: str, port: int) -> RealProcess | None:
    host = _HOSTS.get(machine) if machine is not None else None
    if host is None:
        return None
    for real in host.running.values():
        engine = real.run.engine
        if engine is None or engine.port != port:
            continue
        bound = engine.host or "0.0.0.0"  # noqa: S104 - what the unit binds
        if url_host in LOCAL_HOSTS or url_host == bound:
            return real
    return None


def _exchange(method: str, url: str, headers: dict[str, str], body: str | None) -> Response:
    data = body.encode() if body is not None else None
    wanted = {k: v for k, v in headers.items() if k not in ("host", "content-length")}
    if data is not None and "content-type" not in wanted:
        wanted["content-type"] = "application/x-www-form-urlencoded"  # as curl -d sends it
    if not url.startswith("http://127.0.0.1:"):
        raise ValueError(f"not a real engine's URL: {url}")
    request = urllib.request.Request(url, data=data, headers=wanted, method=method)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=EXCHANGE_TIMEOUT) as answer:  # noqa: S310 - loopback
            status, kind, raw = answer.status, answer.headers.get("content-type", ""), answer.read()
    except urllib.error.HTTPError as error:
        status, kind, raw = error.code, error.headers.get("content-type", ""), error.read()
    except urllib.error.URLError as error:
        reason = error.reason
        raise reason if isinstance(reason, OSError) else ConnectionError(str(reason)) from error
    return Response(status, raw.decode("utf-8", "replace"), kind or "application/json")


def _pump(machine: Machine, unit: Unit, real: RealProcess) -> None:
    lines = real.new_lines()
    if lines:
        machine.log_vllm(unit, real.run, machine.clock(), lines)


def _terminate(real: RealProcess, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM to the process group (API server, engine core), SIGKILL after `timeout`, then
    wait until the group's last process is gone (the port is free for the next start)."""
    process = real.process
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    real.stopped = time.monotonic()
    if real.exited is None:
        real.exited = process.returncode


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@atexit.register
def _stop_all() -> None:
    for real in _ALL:
        if real.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(real.process.pid, signal.SIGKILL)
