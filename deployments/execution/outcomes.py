"""How a change job ends early, as exceptions the runner turns into a final status."""

from __future__ import annotations

from typing import Any


class JobEnded(Exception):
    """Stops the job with a final status and a reason for people to read; `detail` is added to
    the data of the audit event that records the end."""

    def __init__(self, status: str, reason: str, detail: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.detail = detail or {}


class VerificationFailed(Exception):
    """The change was made but the server did not come back healthy and coherent."""
