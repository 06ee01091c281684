"""A webhook receiver on loopback, endpoints, a worker with fast retries, a broker that is
down, and DNS answers for made-up names.

Every test queues deliveries on a private queue of its own, removed afterwards, so nothing is
left in Redis for a later worker to pick up.

A receiver listens on loopback, which the default rule refuses as a destination: the `receiver`
fixture allows 127.0.0.0/8 (WEBHOOK_ALLOWED_NETWORKS) for the test that uses it, and the worker
fixture gives its worker the same setting. Tests of the rule itself set it as they need.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from controlplane.celery import app
from controlplane.notifications import destinations, services, signing
from controlplane.notifications.choices import EventType
from controlplane.notifications.models import WebhookDelivery, WebhookEndpoint
from tests.waiting import wait_until
from tests.workers import WorkerProcess, private_worker

SECRET = "whsec-test-0123456789abcdef"
RETRY_DELAYS = "0.2,0.4,0.8,1.6"  # five attempts in about three seconds
TIMEOUT_SECONDS = "1"
LOOPBACK = "127.0.0.0/8"
# A global address: what the made-up names of these tests resolve to. Nothing ever connects to it
# (the tests that save such endpoints never deliver to them).
PUBLIC_ADDRESS = "93.184.216.34"
MADE_UP_NAMES = (
    "hooks.slack.example",
    "hooks.example.test",
    "other.example.test",
    "ok.example.test",
)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.body)

    @property
    def event(self) -> str:
        return self.headers.get(signing.EVENT_HEADER, "")

    def signed_by(self, secret: str) -> bool:
        return signing.signature_valid(secret, self.body, self.headers[signing.SIGNATURE_HEADER])


@dataclass
class Receiver:
    """An HTTP server on 127.0.0.1 that records every POST and answers from a script."""

    url: str = ""
    requests: list[Received] = field(default_factory=list)
    script: deque[tuple[int, float]] = field(default_factory=deque)  # (status, delay seconds)
    default_status: int = 200
    location: str = ""  # the Location header of a 3xx answer
    sni: list[str | None] = field(default_factory=list)  # server names TLS clients asked for
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, *statuses: int, delay: float = 0.0) -> None:
        self.script.extend((s, delay) for s in statuses)

    def _next(self) -> tuple[int, float]:
        with self.lock:
            return self.script.popleft() if self.script else (self.default_status, 0.0)

    def _record(self, received: Received) -> None:
        with self.lock:
            self.requests.append(received)

    def received(self, event: str | None = None) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if event is None or r.event == event]

    def wait_for(self, event: str, count: int = 1, timeout: float = 30.0) -> list[Received]:
        return wait_until(
            lambda: len(self.received(event)) >= count and self.received(event),
            timeout=timeout,
            explain=lambda: f"{event}: got {self.received()}",
        )


@contextlib.contextmanager
def running_receiver(
    host: str = "127.0.0.1", port: int = 0, *, tls: ssl.SSLContext | None = None
) -> Iterator[Receiver]:
    """A real HTTP (or, with a server-side `tls` context, HTTPS) server on `host`."""
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            state._record(Received(self.path, dict(self.headers.items()), body))
            status, delay = state._next()
            if delay:
                time.sleep(delay)
            payload = b"ok" if status < 300 else b"receiver says no"
            try:
                self.send_response(status)
                if 300 <= status < 400 and state.location:
                    self.send_header("Location", state.location)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the sender gave up (timed out) first

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    if tls is not None:
        tls.sni_callback = lambda _sock, name, _ctx: state.sni.append(name)  # type: ignore[assignment]
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    state.port = server.server_address[1]
    scheme = "https" if tls is not None else "http"
    state.url = f"{scheme}://{host}:{state.port}/hooks/controlplane"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1; loopback is allowed as a destination while the test runs."""
    settings.WEBHOOK_ALLOWED_NETWORKS = [LOOPBACK]
    with running_receiver() as state:
        yield state


class FakeDNS:
    """DNS answers for made-up names, standing in for the resolver the destination rule calls;
    anything it was not told about (IP literals, localhost) the real resolver answers.

    `answer(name, first, then, ...)`: each lookup of `name` takes the next answer and the last
    one repeats; an answer is an address, a list of them, or None for "does not resolve".
    """

    def __init__(self, real: Callable[[str, int], list[str]]) -> None:
        self.real = real
        self.answers: dict[str, list[list[str] | None]] = {}
        self.lookups: list[str] = []

    def answer(self, name: str, *answers: str | list[str] | None) -> None:
        self.answers[name.lower()] = [[a] if isinstance(a, str) else a for a in answers]

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        queue = self.answers.get(host.lower())
        if queue is None:
            return self.real(host, port)
        current = queue[0] if len(queue) == 1 else queue.pop(0)
        if current is None:
            raise destinations.Unresolvable(f"{host}: Name or service not known")
        return list(current)


@pytest.fixture(autouse=True)
def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDNS:
    fake = FakeDNS(destinations.resolve)
    for name in MADE_UP_NAMES:
        fake.answer(name, PUBLIC_ADDRESS)
    monkeypatch.setattr(destinations, "resolve", fake)
    return fake


def _delete_queue(queue: str) -> None:
    with app.connection_for_write() as conn:
        conn.default_channel.queue_delete(queue)


@pytest.fixture(autouse=True)
def webhook_queue(settings: Any) -> Iterator[str]:
    """Deliveries go to a queue of this test's own (the worker fixture consumes it)."""
    queue = f"test-notify-{uuid.uuid4().hex[:12]}"
    settings.WEBHOOK_QUEUE = queue
    settings.WEBHOOK_RETRY_DELAYS = [float(d) for d in RETRY_DELAYS.split(",")]
    settings.WEBHOOK_TIMEOUT_SECONDS = float(TIMEOUT_SECONDS)
    yield queue
    _delete_queue(queue)


def queued_messages(queue: str) -> int:
    with app.connection_for_write() as conn:
        return int(conn.default_channel.queue_declare(queue, passive=False).message_count)


@pytest.fixture
def webhook_worker(
    transactional_db: None, tmp_path: Path, webhook_queue: str
) -> Iterator[WorkerProcess]:
    """A real Celery worker on this test's queue, with retries in fractions of a second.
    Change jobs go to the same worker."""
    with private_worker(
        webhook_queue,
        tmp_path / "worker.log",
        WEBHOOK_QUEUE=webhook_queue,
        WEBHOOK_RETRY_DELAYS=RETRY_DELAYS,
        WEBHOOK_TIMEOUT_SECONDS=TIMEOUT_SECONDS,
        WEBHOOK_ALLOWED_NETWORKS=LOOPBACK,  # the receiver listens on loopback
    ) as worker:
        yield worker


@pytest.fixture
def make_endpoint(admin_user: Any) -> Callable[..., WebhookEndpoint]:
    def make(
        url: str, *, events: list[str] | None = None, name: str = "ops-slack"
    ) -> WebhookEndpoint:
        return services.endpoint_create(
            actor=admin_user,
            name=name,
            url=url,
            secret=SECRET,
            event_types=events if events is not None else list(EventType.values),
        )

    return make


@contextlib.contextmanager
def broker_down() -> Iterator[None]:
    """Point the Celery app at a port where nothing listens, as when Redis is down."""
    saved = app.conf.broker_url, app.amqp._producer_pool, app._pool
    app.conf.broker_url = "redis://127.0.0.1:9/0"
    app.amqp._producer_pool = None
    app._pool = None
    try:
        yield
    finally:
        app.conf.broker_url, app.amqp._producer_pool, app._pool = saved


def wait_until_settled(timeout: float = 30.0) -> list[WebhookDelivery]:
    """All deliveries succeeded or failed (none pending or retrying)."""

    def settled() -> list[WebhookDelivery]:
        deliveries = list(WebhookDelivery.objects.order_by("id"))
        done = deliveries and all(d.status in ("succeeded", "failed") for d in deliveries)
        return deliveries if done else []

    return wait_until(
        settled,
        timeout=timeout,
        explain=lambda: [(d.pk, d.event_type, d.status) for d in WebhookDelivery.objects.all()],
    )
