"""vLLM's OpenAI-compatible HTTP API, as `curl` on the host and as a real streaming server.

Only what the control plane and an operator reach for: /health, /v1/models, /metrics,
/version, /tokenize, and /v1/completions (plus chat) with answers coherent enough for a smoke test,
generated at the pace `simulator.perf` gives the model. `routes` connects and dispatches;
`metrics`, `completions`, `sse`, `text` and `responses` answer; `loopback` is the real HTTP
server that scripts run on a host reach instead of the host's loopback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import routes
from .completions import Pending
from .responses import Response

if TYPE_CHECKING:
    from ..state import Machine

__all__ = ["Pending", "Response", "request"]


def request(
    machine: Machine, method: str, url: str, headers: dict[str, str], body: str | None
) -> tuple[Response | Pending | None, str, int]:
    """`routes.request`, unless the URL is a real engine's port (simulator.real_engine)."""
    from ..real_engine import forwarded  # it subclasses Pending: imported once this package is

    real = forwarded(machine, method, url, headers, body)
    return real if real is not None else routes.request(machine, method, url, headers, body)
