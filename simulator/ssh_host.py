"""One simulated host behind its own asyncssh listener: authentication, faults, sessions."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from . import shell
from .host_keys import load_or_create_key, public_key_text
from .state import Machine

logger = logging.getLogger(__name__)

STDIN_TIMEOUT_SECONDS = 30.0
CONNECTION_LOG_MAX = 1000
_LISTENER_FAULTS = ("unreachable", "host_key_rotated")
# OpenSSH's own default (sshd_config(5), Ciphers), so the client's preference decides as it
# does against a real host: the first of the client's ciphers that the host allows is used.
_ENCRYPTION_ALGS = (
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
)


@dataclass(frozen=True)
class SimHostInfo:
    """What registering a simulated host needs to know about it."""

    name: str
    port: int
    public_key: str  # the host's own key (OpenSSH text), not a rotated one


@dataclass
class ConnectionRecord:
    """What one SSH client asked of a host: the keys it offered and any forwarding it wanted.

    Kept whether or not the host allowed it (it allows no forwarding at all), so a test can
    tell what the client would have used, not only what it got.
    """

    username: str = ""
    offered_keys: list[str] = field(default_factory=list)  # OpenSSH text, in order, once each
    agent_forwarding: bool = False
    x11_forwarding: bool = False
    port_forwarding: list[str] = field(default_factory=list)  # e.g. "listen 127.0.0.1:8000"
    cipher: str = ""  # the one the key exchange settled on, client to host

    @property
    def forwarding_requested(self) -> bool:
        return self.agent_forwarding or self.x11_forwarding or bool(self.port_forwarding)


class _ProcessSink(shell.Sink):
    """Collects a command's output and sends it in one write per stream.

    Each channel write is its own encrypted SSH packet; a probe prints ~100 small pieces, and
    sending them one by one made packet encryption the simulator's main cost.
    """

    def __init__(self, process: asyncssh.SSHServerProcess[str]) -> None:
        super().__init__()
        self.process = process

    def flush(self) -> None:
        if self.stdout:
            self.process.stdout.write("".join(self.stdout))
            self.stdout.clear()
        if self.stderr:
            self.process.stderr.write("".join(self.stderr))
            self.stderr.clear()


class _Connection(asyncssh.SSHServer):
    """Per-connection callbacks: one authorised client key, any user name, no passwords."""

    def __init__(self, host: SimHost) -> None:
        self.host = host
        self.conn: asyncssh.SSHServerConnection | None = None
        self.record = ConnectionRecord()

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        self.host.connections.add(conn)
        self.host.connection_log.append(self.record)
        self._watch_forwarding(conn)

    def _watch_forwarding(self, conn: asyncssh.SSHServerConnection) -> None:
        """asyncssh answers agent and X11 forwarding requests on the connection itself (here:
        refused, the listener allows neither) without asking this object, so the two methods
        it asks are wrapped, on this connection only, to note the request first."""
        record = self.record
        create_agent_listener = conn.create_agent_listener
        attach_x11_listener = conn.attach_x11_listener

        async def agent_requested() -> bool:
            record.agent_forwarding = True
            return await create_agent_listener()

        async def x11_requested(
            chan: asyncssh.SSHServerChannel[Any], proto: bytes, data: bytes, screen: int
        ) -> str | None:
            record.x11_forwarding = True
            return await attach_x11_listener(chan, proto, data, screen)

        conn.create_agent_listener = agent_requested  # type: ignore[method-assign]
        conn.attach_x11_listener = x11_requested  # type: ignore[method-assign,assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.host.connections.discard(self.conn)

    def begin_auth(self, username: str) -> bool:
        self.record.username = username
        if self.conn is not None:  # the key exchange is done by now
            self.record.cipher = str(self.conn.get_extra_info("recv_cipher", ""))
        return True

    def password_auth_supported(self) -> bool:
        return False

    def kbdint_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        offered = key.export_public_key("openssh").decode().strip()
        if offered not in self.record.offered_keys:  # asked once, then again with a signature
            self.record.offered_keys.append(offered)
        return key.public_data == self.host.client_public_data

    # Forwarding of any kind is refused; each request is noted in the connection's record.

    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> bool:
        self.record.port_forwarding.append(f"connect {dest_host}:{dest_port}")
        return False

    def server_requested(self, listen_host: str, listen_port: int) -> bool:
        self.record.port_forwarding.append(f"listen {listen_host}:{listen_port}")
        return False

    def unix_connection_requested(self, dest_path: str) -> bool:
        self.record.port_forwarding.append(f"connect unix:{dest_path}")
        return False

    def unix_server_requested(self, listen_path: str) -> bool:
        self.record.port_forwarding.append(f"listen unix:{listen_path}")
        return False


class SimHost:
    """One simulated machine and the SSH listener in front of it."""

    def __init__(
        self,
        machine: Machine,
        *,
        host_key: asyncssh.SSHKey,
        rotated_key_path: Path,
        client_public_data: bytes,
        bind: str,
    ) -> None:
        self.machine = machine
        self.name = machine.name
        self.port = 0
        self.bind = bind
        self.host_key = host_key
        self.rotated_key_path = rotated_key_path
        self._rotated_key: asyncssh.SSHKey | None = None
        self.client_public_data = client_public_data
        self.connections: set[asyncssh.SSHServerConnection] = set()
        # The newest SSH connections, oldest first (bounded: the demo fleet runs for days).
        self.connection_log: collections.deque[ConnectionRecord] = collections.deque(
            maxlen=CONNECTION_LOG_MAX
        )
        self.acceptor: asyncssh.SSHAcceptor | None = None
        self._listening_key: asyncssh.SSHKey | None = None
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def rotated_key(self) -> asyncssh.SSHKey:
        if self._rotated_key is None:
            self._rotated_key = load_or_create_key(self.rotated_key_path)
        return self._rotated_key

    def public_key(self) -> str:
        return public_key_text(self.host_key)

    def presented_key(self) -> str:
        key = self.rotated_key if "host_key_rotated" in self.machine.faults else self.host_key
        return public_key_text(key)

    def info(self) -> SimHostInfo:
        return SimHostInfo(self.name, self.port, self.public_key())

    # --- listener --------------------------------------------------------------------------

    async def _listen(self, key: asyncssh.SSHKey) -> None:
        self.acceptor = await asyncssh.listen(
            self.bind,
            self.port,
            server_host_keys=[key],
            server_factory=lambda: _Connection(self),
            process_factory=self._handle,
            encoding="utf-8",
            encryption_algs=_ENCRYPTION_ALGS,
            agent_forwarding=False,
            x11_forwarding=False,
            allow_scp=False,
            sftp_factory=None,
            login_timeout=30,
            reuse_address=True,
        )
        self._listening_key = key

    async def start(self, port: int) -> None:
        self.port = port
        await self.apply_faults()

    async def close(self) -> None:
        if self.acceptor is not None:
            self.acceptor.close()
            self.acceptor = None
        for conn in list(self.connections):
            conn.abort()
        self.connections.clear()
        for task in list(self._tasks):
            task.cancel()

    async def apply_faults(self) -> None:
        """Bring the listener in line with the faults: closed, or presenting the right key.

        Open connections are dropped whenever the listener changes: an unreachable host does
        not keep serving old sessions, and a host whose key rotated was reinstalled.
        """
        async with self._lock:
            faults = self.machine.faults
            want_open = "unreachable" not in faults
            want_key = self.rotated_key if "host_key_rotated" in faults else self.host_key
            if self.acceptor is not None and (not want_open or self._listening_key is not want_key):
                self.acceptor.close()
                self.acceptor = None
                for conn in list(self.connections):
                    conn.abort()
            if want_open and self.acceptor is None:
                await self._listen(want_key)

    async def set_fault(
        self, fault: str, on: bool = True, models: Iterable[str] | None = None
    ) -> None:
        self.machine.set_fault(fault, on, models)
        if fault in _LISTENER_FAULTS:
            await self.apply_faults()

    def fault_changed_remotely(self, fault: str, on: bool) -> None:
        """`simctl fault` over SSH: let the answer reach the client before the listener moves."""
        if fault not in _LISTENER_FAULTS:
            return

        async def later() -> None:
            await asyncio.sleep(0.2)
            await self.apply_faults()

        task = asyncio.get_running_loop().create_task(later())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- sessions --------------------------------------------------------------------------

    def _session(self, process: asyncssh.SSHServerProcess[str]) -> shell.Session:
        async def read_stdin() -> str:
            sink.flush()  # what ran before may matter to whoever feeds stdin
            try:
                return await asyncio.wait_for(process.stdin.read(), STDIN_TIMEOUT_SECONDS)
            except (TimeoutError, asyncssh.Error):
                return ""

        sink = _ProcessSink(process)
        return shell.Session(
            machine=self.machine,
            username=process.get_extra_info("username") or "root",
            sink=sink,
            read_stdin=read_stdin,
            on_fault_change=self.fault_changed_remotely,
        )

    async def _handle(self, process: asyncssh.SSHServerProcess[str]) -> None:
        status = 255
        try:
            command = process.command
            if command is None:
                status = await self._interactive(process)
            else:
                self.machine.command_log.append(command)
                if "slow" in self.machine.faults:
                    await asyncio.sleep(self.machine.slow_seconds)
                session = self._session(process)
                try:
                    status = await shell.run(session, command)
                finally:
                    session.sink.flush()
        except (asyncssh.Error, BrokenPipeError, ConnectionError):
            return
        except Exception:
            logger.exception("simulated host %s failed on %r", self.name, process.command)
            with contextlib.suppress(Exception):
                process.stderr.write("bash: internal error in the simulated host\n")
        with contextlib.suppress(Exception):
            process.exit(status)

    async def _interactive(self, process: asyncssh.SSHServerProcess[str]) -> int:
        """A login shell for people poking at the demo with plain `ssh`."""
        user = process.get_extra_info("username") or "root"
        prompt = f"{user}@{self.name}:~{'#' if user == 'root' else '$'} "
        hardware = self.machine.hardware
        process.stdout.write(
            f"Welcome to {self.name} (simulated {hardware.gpu_count}x {hardware.label} host). "
            "Try `simctl status`.\n"
        )
        status = 0
        login = None  # one logind session for the whole shell, made when first needed
        while True:
            process.stdout.write(prompt)
            try:
                line = await process.stdin.readline()
            except asyncssh.Error:
                return status
            if not line:
                return status
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            self.machine.command_log.append(line)
            if line.strip() in ("exit", "logout"):
                return status
            if "slow" in self.machine.faults:
                await asyncio.sleep(self.machine.slow_seconds)
            session = self._session(process)
            session.login = login
            try:
                status = await shell.run(session, line)
            finally:
                session.sink.flush()
            login = session.login
