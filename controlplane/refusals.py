"""One exception for every rule that refuses an action, carrying the HTTP status it maps to.

Services raise a `Refused` (or a subclass named after their domain); the HTML views and the JSON
API turn it into a response with `refusal.http_status`, from the one table below.
"""

from __future__ import annotations

from typing import Any

# code -> HTTP status. stale: the snapshot a decision rests on is too old or superseded;
# conflict: the state of things forbids it now (another job, drift, a wrong status);
# forbidden: the user may not; invalid: the input is wrong; queue_unavailable: the task broker
# did not take the job.
HTTP_STATUS = {
    "stale": 409,
    "conflict": 409,
    "forbidden": 403,
    "invalid": 400,
    "not_found": 404,
    "queue_unavailable": 503,
}


class Refused(Exception):
    """A rule refused an action. The message is for a person; `details` for a machine."""

    def __init__(self, message: str, *, code: str = "invalid", **details: Any) -> None:
        super().__init__(message)
        if code not in HTTP_STATUS:
            raise ValueError(f"unknown refusal code {code!r}")
        self.message = message
        self.code = code
        self.details = details

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]
