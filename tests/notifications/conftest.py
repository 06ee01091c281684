"""A webhook receiver on loopback, endpoints, a worker with fast retries, and a broker that is
down.

Every test queues deliveries on a private queue of its own, removed afterwards, so nothing is
left in Redis for a later worker to pick up.
"""

from __future__ import annotations

import contextlib
import json
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
from controlplane.notifications import services, signing
from controlplane.notifications.choices import EventType
from controlplane.notifications.models import WebhookDelivery, WebhookEndpoint
from tests.waiting import wait_until
from tests.workers import WorkerProcess, private_worker

SECRET = "whsec-test-0123456789abcdef"
RETRY_DELAYS = "0.2,0.4,0.8,1.6"  # five attempts in about three seconds
TIMEOUT_SECONDS = "1"


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


@pytest.fixture
def receiver() -> Iterator[Receiver]:
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
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the sender gave up (timed out) first

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/controlplane"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


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
