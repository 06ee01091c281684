"""The requests a host's load balancer keeps in flight on its inference server, and what
becomes of them when the host leaves the rotation or its server stops.

In rotation, the balancer keeps the offered number in flight (running, waiting): as one
finishes, another arrives, so the count holds; tests and demos set it (`Machine.set_inflight`,
`simctl inflight`). Out of rotation (the `lb-drain` tool, or the balancer's HTTP agent) no new
request arrives and those in flight finish: the running ones at times spread evenly over one
request's length (they were at every stage of their generation), each waiting one in the first
slot that frees, a whole request later. A server draining on stop (vLLM's --shutdown-timeout)
refuses the balancer's new requests with 503, which has the same effect. A server that stops
aborts whatever is left; once one serves again, the balancer's load comes back if the host is
in rotation.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

# One background request from arrival to its last token (simulated seconds): a long chat
# answer on a large MoE model at a few dozen tokens per second under load.
REQUEST_SECONDS = 20.0


@dataclass
class Load:
    running: int = 0  # what the balancer keeps in flight while the host is in rotation
    waiting: int = 0
    in_rotation: bool = True
    request_seconds: float = REQUEST_SECONDS
    # No request arrives any more: each one left in flight, as (start, end). None: the offered
    # load holds. Empty: nothing in flight (finished, or aborted by a stop).
    finishing: list[tuple[float, float]] | None = None

    def counts(self, now: float) -> tuple[int, int]:
        """(running, waiting) at `now`."""
        if self.finishing is None:
            return self.running, self.waiting
        running = sum(1 for start, end in self.finishing if start <= now < end)
        waiting = sum(1 for start, _ in self.finishing if start > now)
        return running, waiting

    def last_end(self, now: float) -> float:
        """When the last request in flight finishes (`now` if the load still holds, or
        earlier when none is left)."""
        if self.finishing is None:
            return now if self.running or self.waiting else 0.0
        return max((end for _, end in self.finishing), default=0.0)

    def set(self, running: int, waiting: int, now: float) -> None:
        """The balancer's offered load; while no request arrives, these are what is in flight
        now, and they finish from here."""
        self.running, self.waiting = max(0, int(running)), max(0, int(waiting))
        if self.finishing is not None:
            self.finishing = None
            self.stop_arrivals(now)

    def stop_arrivals(self, now: float) -> None:
        """No new request from now on (out of rotation, or a server draining): those in
        flight finish on their own."""
        if self.finishing is not None:
            return
        running, waiting = self.running, self.waiting
        ends = [now + self.request_seconds * (i + 1) / running for i in range(running)]
        self.finishing = [(float("-inf"), end) for end in ends]
        slots = list(ends) or [now]
        heapq.heapify(slots)
        for _ in range(waiting):
            start = heapq.heappop(slots)
            self.finishing.append((start, start + self.request_seconds))
            heapq.heappush(slots, start + self.request_seconds)

    def abort(self) -> None:
        """The server stopped: whatever was in flight is gone."""
        self.finishing = []

    def server_started(self) -> None:
        """A server serves again: the balancer sends it requests if the host is in rotation."""
        self.finishing = None if self.in_rotation else []

    def rotation_out(self, now: float) -> None:
        self.in_rotation = False
        self.stop_arrivals(now)

    def rotation_in(self) -> None:
        self.in_rotation = True
        self.finishing = None
