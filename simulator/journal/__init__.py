"""The lines a vLLM server writes to the journal while it starts, serves, stops and dies.

Operators read these in the control plane when a change fails, so they follow vLLM 0.32's real
shapes (the banner, logger format, uvicorn's unprefixed lines, Python tracebacks) closely enough
to be recognised; tests/simulator/test_capture_parity.py holds the startup and shutdown lines to
the real-engine tier's journal capture.
One module per phase (`startup`, `ready`, `shutdown`, `failures`); `log_format` holds the shapes.
"""

from __future__ import annotations

from .failures import failure_lines
from .ready import ready_lines
from .shutdown import shutdown_lines
from .startup import startup_lines

__all__ = ["failure_lines", "ready_lines", "shutdown_lines", "startup_lines"]
