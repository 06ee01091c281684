"""vLLM's OpenAI-compatible HTTP API, as `curl` on the host and as a real streaming server.

Only what the control plane and an operator reach for: /health, /v1/models, /metrics,
/version, /tokenize, and /v1/completions (plus chat) with answers coherent enough for a smoke test,
generated at the pace `simulator.perf` gives the model. `routes` connects and dispatches;
`metrics`, `completions`, `sse`, `text` and `responses` answer; `loopback` is the real HTTP
server that scripts run on a host reach instead of the host's loopback.
"""

from __future__ import annotations

from .completions import Pending
from .responses import Response
from .routes import request

__all__ = ["Pending", "Response", "request"]
