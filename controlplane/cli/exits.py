"""cpctl's exit codes, stable for scripts, and how an API answer maps to one.

The server's refusal codes (controlplane.refusals.HTTP_STATUS, deployments' ChangeRefused,
the `drifted` answer of an approval) decide the finer codes: a script can tell "ask again on
a fresh snapshot" (STALE) from "the host changed" (DRIFT) from "no" (REFUSED).
"""

from __future__ import annotations

import enum
from typing import Any


class ExitCode(enum.IntEnum):
    OK = 0
    ERROR = 1  # anything not below: a server error, an answer cpctl cannot read
    USAGE = 2  # a bad command line or configuration (Click's own code for usage errors)
    AUTH = 3  # 401: no valid token; 403: this user may not (a role, the two-person rule)
    NOT_FOUND = 4  # 404: no such host, change, snapshot, token; or an endpoint this server lacks
    REFUSED = 5  # 400/409: invalid input or a conflict; a watched change or rollout said no to
    # (a change rejected or cancelled, a rollout rejected or aborted)
    STALE = 6  # the snapshot the decision rests on is too old or superseded (code `stale`)
    DRIFT = 7  # the host changed materially (code `drifted`, a job that drifted, a diff)
    FAILED = 8  # a job failed, rolled back or was interrupted; a probe or verification failed;
    # a rollout halted (its failed wave rolled back) or failed
    UNFINISHED = 9  # `watch --timeout` passed before the change or rollout finished
    UNREACHABLE = 10  # no answer: connection refused, timed out, or 502/503/504


class CliError(Exception):
    """Stops the command: `message` goes to stderr, `body` (the API's JSON) to stdout under
    --json, and cpctl exits with `code`."""

    def __init__(self, message: str, code: ExitCode, body: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.body = body


def code_for(status: int, body: Any) -> ExitCode:
    """The exit code for an HTTP error answer (status >= 300)."""
    code = body.get("code") if isinstance(body, dict) else None
    if code == "stale":
        return ExitCode.STALE
    if code == "drifted":
        return ExitCode.DRIFT
    if status in (401, 403):
        return ExitCode.AUTH
    if status == 404:
        return ExitCode.NOT_FOUND
    if status in (502, 503, 504):
        return ExitCode.UNREACHABLE
    if 400 <= status < 500:
        return ExitCode.REFUSED
    return ExitCode.ERROR


# What the end of a watched change means for a script. (Whether it has ended is the server's
# word: its `finished_at` is set by the one function that writes a final status.)
OUTCOMES = {
    "succeeded": ExitCode.OK,
    "drifted": ExitCode.DRIFT,
    "failed": ExitCode.FAILED,
    "rolled_back": ExitCode.FAILED,
    "interrupted": ExitCode.FAILED,
    "rejected": ExitCode.REFUSED,
    "cancelled": ExitCode.REFUSED,
}


def outcome(status: str) -> ExitCode:
    return OUTCOMES.get(status, ExitCode.ERROR)


# What the end of a watched rollout means. `halted`: a wave failed a check and was rolled back
# (the server's "halted and rolled back"); `failed`: it stopped because its approval no longer
# held. Aborted and rejected: a person said no. Whether it has ended is, again, the server's
# word (`finished_at`, on the rollout and on each of its hosts).
ROLLOUT_OUTCOMES = {
    "succeeded": ExitCode.OK,
    "halted": ExitCode.FAILED,
    "failed": ExitCode.FAILED,
    "aborted": ExitCode.REFUSED,
    "rejected": ExitCode.REFUSED,
}


def rollout_outcome(status: str) -> ExitCode:
    return ROLLOUT_OUTCOMES.get(status, ExitCode.ERROR)
