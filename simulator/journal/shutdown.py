"""What a serving vLLM API server logs when systemd stops it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import log_format as fmt

if TYPE_CHECKING:
    from ..state import Run


def shutdown_lines(run: Run) -> list[str]:
    """uvicorn's lines as the server stops (not prefixed: uvicorn logs them itself)."""
    return [
        f"{fmt.UVICORN}Shutting down",
        f"{fmt.UVICORN}Waiting for application shutdown.",
        f"{fmt.UVICORN}Application shutdown complete.",
        f"{fmt.UVICORN}Finished server process [{run.pid}]",
    ]
