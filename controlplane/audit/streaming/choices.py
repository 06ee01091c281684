"""What one send to a destination came to (a task's result, the command's report)."""

from __future__ import annotations

import enum


class SendStatus(enum.StrEnum):
    CAUGHT_UP = "caught_up"  # everything appended so far was taken
    MORE = "more"  # the task sent its share of batches; a fresh task carries on
    FAILED = "failed"  # the receiver did not take a batch; the next try is scheduled
    HALTED = "halted"  # a gap or a broken link in the chain: the stream waits there
    BUSY = "busy"  # another worker holds the destination
    WAITING = "waiting"  # backing off after a failure
    NOT_CONFIGURED = "not_configured"  # no such destination in AUDIT_STREAMS
