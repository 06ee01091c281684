"""vLLM's OpenAI-compatible HTTP API as `curl` on the host sees it.

Only what the control plane and an operator reach for: /health, /v1/models, /metrics,
/version, and /v1/completions (plus chat) with answers coherent enough for a smoke test.
`routes` connects and dispatches; `metrics`, `completions` and `responses` answer.
"""

from __future__ import annotations

from .responses import Response
from .routes import request

__all__ = ["Response", "request"]
