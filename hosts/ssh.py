"""All SSH I/O: pinned host keys, timeouts, and connections kept open between probes.

The Django side is synchronous; SSH is asyncio. One event loop runs in a daemon thread per
process and owns every connection, so a worker reuses its connections from one probe round to
the next instead of paying for a key exchange each time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import asyncssh

logger = logging.getLogger(__name__)
T = TypeVar("T")

# The first of these the host also allows is used: AES-GCM first. OpenSSH offers ChaCha20-Poly1305
# too, and asyncssh, which would pick it first, builds several cipher objects a packet for it:
# about 12 us a packet against 2 us for AES-GCM (bench/README.md, "The cipher"). The rest of
# asyncssh's own list follows, in its order, for hosts that allow neither GCM cipher.
_PREFERRED_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
ENCRYPTION_ALGS = (
    *_PREFERRED_CIPHERS,
    *(
        name
        for name in (alg.decode() for alg in asyncssh.encryption.get_default_encryption_algs())
        if name not in _PREFERRED_CIPHERS
    ),
)


@dataclass(frozen=True)
class SSHTarget:
    """Everything needed to reach one host. `pinned_key` empty means no key is trusted yet."""

    address: str
    port: int
    username: str
    private_key: str = field(repr=False)
    pinned_key: str = ""

    @property
    def pool_key(self) -> tuple[str, int, str, str, int]:
        return (self.address, self.port, self.username, self.pinned_key, hash(self.private_key))


class SSHFailure(Exception):
    """A command could not be run. `kind` matches a snapshot status."""

    def __init__(self, kind: str, message: str, presented_key: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.presented_key = presented_key


@dataclass
class CommandResult:
    stdout: str
    stderr: str
    exit_status: int | None
    seconds: float
    reused_connection: bool


class _PinnedKeyClient(asyncssh.SSHClient):
    """Remembers the key the server presented, so an unknown or changed key can be shown to an
    admin for acceptance. Trust itself is decided by asyncssh against the pinned key alone."""

    def __init__(self) -> None:
        self.presented_key = ""

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        self.presented_key = key.export_public_key("openssh").decode().strip()
        return False  # only the pinned key (passed as known_hosts) is trusted


class ConnectionPool:
    """Open connections keyed by target. Lives on the SSH loop; not thread-safe by design."""

    def __init__(self) -> None:
        self._conns: dict[tuple[Any, ...], asyncssh.SSHClientConnection] = {}
        self._locks: dict[tuple[Any, ...], asyncio.Lock] = {}
        self._used: dict[tuple[Any, ...], float] = {}  # monotonic time of each one's last use

    async def _connect(self, target: SSHTarget, timeout: float) -> asyncssh.SSHClientConnection:
        client = _PinnedKeyClient()
        trusted = [asyncssh.import_public_key(target.pinned_key)] if target.pinned_key else []
        try:
            conn, _ = await asyncio.wait_for(
                asyncssh.create_connection(
                    lambda: client,
                    target.address,
                    target.port,
                    username=target.username,
                    # The host's credential and nothing else: no ssh-agent (SSH_AUTH_SOCK),
                    # no ~/.ssh/id_* files, no host-based or Kerberos login, and nothing the
                    # worker's account could lend a host (agent or X11 forwarding). asyncssh
                    # defaults most of these off; saying so keeps a refactor from turning one
                    # on. tests/security/test_ssh_hardening.py checks what the host sees.
                    client_keys=[asyncssh.import_private_key(target.private_key)],
                    ignore_encrypted=True,
                    agent_path=None,
                    agent_forwarding=False,
                    x11_forwarding=False,
                    client_host_keys=None,
                    gss_auth=False,
                    gss_kex=False,
                    preferred_auth="publickey",
                    known_hosts=(trusted, [], []),
                    password=None,
                    kbdint_auth=False,
                    config=None,
                    keepalive_interval=30,
                    encryption_algs=ENCRYPTION_ALGS,
                    login_timeout=timeout,
                    connect_timeout=timeout,
                ),
                timeout,
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            kind = "host_key_mismatch" if target.pinned_key else "host_key_unknown"
            raise SSHFailure(kind, f"host key not trusted: {exc}", client.presented_key) from exc
        except asyncssh.PermissionDenied as exc:
            raise SSHFailure("auth_failed", f"authentication failed: {exc.reason}") from exc
        except TimeoutError as exc:
            raise SSHFailure("unreachable", f"connect timed out after {timeout:g} s") from exc
        except (OSError, asyncssh.ConnectionLost) as exc:
            raise SSHFailure("unreachable", f"cannot connect: {exc}") from exc
        except asyncssh.Error as exc:
            raise SSHFailure("error", f"SSH error: {exc.reason}") from exc
        return conn

    async def _get(
        self, target: SSHTarget, timeout: float
    ) -> tuple[asyncssh.SSHClientConnection, bool]:
        key = target.pool_key
        self._used[key] = time.monotonic()
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one handshake per target even when callers race
            conn = self._conns.get(key)
            if conn is not None and not conn.is_closed():
                return conn, True
            conn = await self._connect(target, timeout)
            self._conns[key] = conn
            return conn, False

    def _drop(self, target: SSHTarget) -> None:
        conn = self._conns.pop(target.pool_key, None)
        if conn is not None:
            conn.close()

    async def run(
        self,
        target: SSHTarget,
        command: str,
        *,
        connect_timeout: float,
        command_timeout: float,
        stdin: str | None = None,
        read_only: bool = True,
    ) -> CommandResult:
        """Run `command` on a pooled connection. A reused connection that turns out dead is
        replaced once; for a command that is not `read_only` only when the channel could not
        even be opened, since a connection lost later may have run it already (a second
        `systemctl restart` is a second restart)."""
        started = time.monotonic()
        for attempt in (1, 2):
            conn, reused = await self._get(target, connect_timeout)
            try:
                result = await asyncio.wait_for(
                    conn.run(command, input=stdin, check=False), command_timeout
                )
            except TimeoutError as exc:
                self._drop(target)  # a hung channel may leave the connection unusable
                raise SSHFailure("error", f"command timed out after {command_timeout:g} s") from exc
            except asyncio.CancelledError:
                self._drop(target)  # closing the connection ends the remote command's channel
                raise
            except (
                asyncssh.ChannelOpenError,
                asyncssh.ConnectionLost,
                BrokenPipeError,
                OSError,
            ) as exc:
                lost: Exception = exc
            else:
                if result.exit_status is not None or result.exit_signal is not None:
                    return CommandResult(
                        stdout=_text(result.stdout),
                        stderr=_text(result.stderr),
                        exit_status=result.exit_status,
                        seconds=time.monotonic() - started,
                        reused_connection=reused,
                    )
                # Neither an exit status nor a signal: the connection closed under the command.
                lost = asyncssh.ConnectionLost("the connection closed while the command ran")
            self._drop(target)
            never_sent = isinstance(lost, asyncssh.ChannelOpenError)
            if reused and attempt == 1 and (read_only or never_sent):
                continue  # the host restarted or dropped an idle connection: reconnect once
            raise SSHFailure("unreachable", f"connection lost: {lost}") from lost
        raise AssertionError("unreachable")  # pragma: no cover

    async def close_all(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        self._used.clear()

    async def close_idle(self, max_idle: float) -> int:
        """Close connections unused for `max_idle` seconds: hosts this process no longer probes
        (another worker took them over) must not hold a connection and its file descriptors
        here for ever. Returns how many were closed."""
        cutoff = time.monotonic() - max_idle
        idle = [key for key, used in self._used.items() if used < cutoff]
        for key in idle:
            self._used.pop(key, None)
            lock = self._locks.get(key)
            if lock is not None and lock.locked():
                continue  # a connect is in progress right now
            self._locks.pop(key, None)
            conn = self._conns.pop(key, None)
            if conn is not None:
                conn.close()
        return len(idle)

    def __len__(self) -> int:
        return len(self._conns)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class SSHLoop:
    """The process's SSH event loop thread and its connection pool."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Lock()
        self.pool = ConnectionPool()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._started:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="ssh-loop", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
                self.pool = ConnectionPool()
            return self._loop

    def call(
        self,
        coro: Coroutine[Any, Any, T],
        timeout: float | None = None,
        *,
        heartbeat: Callable[[], None] | None = None,
        every: float = 10.0,
    ) -> T:
        """Run `coro` on the SSH loop and wait for it. With `heartbeat`, call it every `every`
        seconds while waiting (a job renewing its lease while its command runs); if it raises,
        the command is cancelled and the error propagates."""
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure())
        if heartbeat is None:
            return future.result(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = every if deadline is None else max(0.0, min(every, deadline - time.monotonic()))
            try:
                return future.result(wait)
            except concurrent.futures.TimeoutError:
                if deadline is not None and time.monotonic() >= deadline:
                    future.cancel()
                    raise
            try:
                heartbeat()
            except BaseException:
                future.cancel()
                raise

    def close(self) -> None:
        if self._loop is not None:
            self.call(self.pool.close_all())


ssh_loop = SSHLoop()


async def gather_limited(aws: Iterable[Awaitable[T]], limit: int) -> list[T]:
    """Run awaitables with at most `limit` in flight, keeping their order."""
    semaphore = asyncio.Semaphore(limit)

    async def one(aw: Awaitable[T]) -> T:
        async with semaphore:
            return await aw

    return list(await asyncio.gather(*(one(aw) for aw in aws)))


async def fetch_host_key(address: str, port: int, timeout: float = 10.0) -> str:
    """The key a host presents, read without authenticating (for `add_host --accept-host-key`)."""
    try:
        key = await asyncio.wait_for(asyncssh.get_server_host_key(address, port), timeout)
    except (OSError, TimeoutError, asyncssh.Error) as exc:
        raise SSHFailure(
            "unreachable", f"cannot read the host key of {address}:{port}: {exc}"
        ) from exc
    if key is None:
        raise SSHFailure("error", f"{address}:{port} presented no host key")
    return key.export_public_key("openssh").decode().strip()
