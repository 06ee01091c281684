"""What a serving vLLM API server logs when systemd stops it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import log_format as fmt

if TYPE_CHECKING:
    from ..state import Run


def shutdown_lines(run: Run) -> list[str]:
    api = fmt.api(run)
    return [
        f"{api} INFO:     Shutting down",
        f"{api} INFO:     Waiting for application shutdown.",
        f"{api} INFO:     Application shutdown complete.",
    ]
