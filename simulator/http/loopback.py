"""A real HTTP/1.1 server for the simulated hosts' inference servers, one per fleet.

Scripts run on a simulated host (`simulator.tools.scripts`) have their loopback URLs rewritten
to this server on 127.0.0.1 (a random port) under a prefix naming the host and the port they
meant: `/sim/gpu-01/8000/v1/completions` is `http://127.0.0.1:8000/v1/completions` on gpu-01
(`/sim/gpu-01/localhost:8000/...` when the URL said localhost). Every route answers as the
host's `curl` sees it (simulator.http.routes: the API key, 404s, /health, /v1/models,
/metrics); completions are paced by the run's engine (simulator.serving), so concurrent
streams on one machine share its batch, and `"stream": true` gets server-sent events as the
tokens are generated, in a chunked response, connection kept alive between requests.

A simulated server that does not answer (stopped, loading, failed, bound elsewhere) resets the
connection, and one that stops mid-answer resets it there; URLs rewritten while their server
was already down point at `refusing_port`, a bound socket nobody listens on, so the client
sees a plain "connection refused".
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import struct
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from typing import TYPE_CHECKING, NoReturn

from .. import serving
from . import sse
from .completions import Pending, account
from .responses import Response, json_response
from .routes import handle

if TYPE_CHECKING:
    from ..state import Machine

_TARGET = re.compile(r"/sim/([A-Za-z0-9_.-]+)/(?:(127\.0\.0\.1|localhost):)?(\d{1,5})(/[^?#]*)?")
_MAX_HEADER_LINES = 100
_MAX_BODY = 16 * 1024 * 1024

_SERVERS: weakref.WeakKeyDictionary[Machine, LoopbackServer] = weakref.WeakKeyDictionary()


def server_for(machine: Machine) -> LoopbackServer | None:
    """The HTTP server scripts on this machine reach (None: its fleet runs none)."""
    return _SERVERS.get(machine)


@dataclass
class _Request:
    method: str
    target: str
    headers: dict[str, str]
    body: str


class _Closed(Exception):
    """The connection is done (reset, or the client left)."""


class LoopbackServer:
    """The fleet's HTTP server: routes each request to the machine its path names."""

    def __init__(self, machines: Callable[[str], Machine | None], bind: str = "127.0.0.1"):
        self.machines = machines
        self.bind = bind
        self.port = 0
        self.refusing_port = 0
        self._server: asyncio.Server | None = None
        self._refuser: socket.socket | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._registered: list[Machine] = []

    def register(self, machine: Machine) -> None:
        _SERVERS[machine] = self
        self._registered.append(machine)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connection, self.bind, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        refuser = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        refuser.bind((self.bind, 0))  # bound, never listening: connections are refused
        self.refusing_port = refuser.getsockname()[1]
        self._refuser = refuser

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            self._server = None
        if self._refuser is not None:
            self._refuser.close()
            self._refuser = None
        for machine in self._registered:  # the registry must not keep the fleet alive
            _SERVERS.pop(machine, None)
        self._registered.clear()

    def url_for(self, host: str, url_host: str, port: int) -> str:
        """Where a script on `host` reaches `http://URL_HOST:PORT` (refused: nobody answers)."""
        machine = self.machines(host)
        serving_now = machine is not None and machine.server_at(url_host, port) is not None
        spec = str(port) if url_host == "127.0.0.1" else f"{url_host}:{port}"
        address = f"{self.bind}:{self.port if serving_now else self.refusing_port}"
        return f"http://{address}/sim/{host}/{spec}"

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    break
                if not await self._answer(request, writer):
                    break
        except _Closed:
            return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return
        except ValueError:  # a malformed request (Content-Length): uvicorn drops those too
            return
        finally:
            self._writers.discard(writer)
            if not writer.transport.is_closing():
                writer.close()

    async def _answer(self, request: _Request, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; whether the connection stays open for the next."""
        keep = request.headers.get("connection", "").lower() != "close"
        match = _TARGET.fullmatch(request.target.split("?", 1)[0].split("#", 1)[0])
        if match is None:
            await _send(writer, json_response(404, {"detail": "Not Found"}))
            return keep
        host, url_host, port, path = match.groups()
        machine = self.machines(host)
        served = machine.server_at(url_host or "127.0.0.1", int(port)) if machine else None
        if machine is None or served is None:
            _reset(writer)  # nothing listens there on the host
        unit, run = served
        reached = handle(
            machine, unit, run, request.method, path or "/", request.body, request.headers
        )
        if isinstance(reached, Response):
            await _send(writer, reached)
        elif reached.answer.stream:
            await _stream(writer, reached)
        else:
            response = await reached.complete()
            if response is None:
                _reset(writer)  # the server stopped while generating
            await _send(writer, response)
        return keep


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    line = await reader.readline()
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _Closed
    headers: dict[str, str] = {}
    for _ in range(_MAX_HEADER_LINES):
        raw = (await reader.readline()).decode("latin-1").rstrip("\r\n")
        if not raw:
            break
        name, _, value = raw.partition(":")
        headers[name.strip().lower()] = value.strip()
    else:
        raise _Closed
    length = int(headers.get("content-length", "0") or 0)
    if not 0 <= length <= _MAX_BODY:
        raise _Closed
    body = await reader.readexactly(length) if length else b""
    return _Request(parts[0], parts[1], headers, body.decode("utf-8", "replace"))


def _reset(writer: asyncio.StreamWriter) -> NoReturn:
    """Drop the connection with a TCP reset, as a closed port or a killed server does."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
    raise _Closed


async def _send(writer: asyncio.StreamWriter, response: Response) -> None:
    writer.write(response.head().encode() + response.body.encode())
    await writer.drain()


def _chunk(text: str) -> bytes:
    data = text.encode()
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _stream(writer: asyncio.StreamWriter, pending: Pending) -> None:
    """Server-sent events as the engine generates: each step's new tokens, one chunk."""
    answer = pending.answer
    engine = serving.engine_for(pending.machine, pending.unit_name, pending.run)
    stream = engine.submit(answer.prompt_tokens, answer.completion_tokens)
    writer.write(
        (
            "HTTP/1.1 200 OK\r\n"
            f"date: {formatdate(usegmt=True)}\r\n"
            "server: uvicorn\r\n"
            "content-type: text/event-stream; charset=utf-8\r\n"
            "transfer-encoding: chunked\r\n\r\n"
        ).encode()
    )
    sent = 0
    try:
        while True:
            if stream.aborted:
                account(pending.run, answer, sent, aborted=True)
                _reset(writer)  # the server stopped mid-stream
            if stream.generated > sent:  # one chunk, however many steps it missed
                opening = sse.opening(answer) if sent == 0 else ""
                writer.write(_chunk(opening + sse.tokens(answer, sent, stream.generated)))
                sent = stream.generated
                await writer.drain()
            if stream.finished:
                break
            await stream.wait()
        writer.write(_chunk(sse.closing(answer)) + b"0\r\n\r\n")
        await writer.drain()
        account(pending.run, answer, sent)
    except (ConnectionError, asyncio.CancelledError):
        engine.cancel(stream)  # the client went away: stop generating for it
        account(pending.run, answer, sent, aborted=True)
        raise
