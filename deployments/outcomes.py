"""How a change job ends early, as exceptions the runner turns into a final status."""

from __future__ import annotations


class JobEnded(Exception):
    """Stops the job with a final status and a reason for people to read."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class VerificationFailed(Exception):
    """The change was made but the server did not come back healthy and coherent."""
