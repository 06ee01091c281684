"""Why a batch did not reach its destination, in words an administrator can act on.

Every transport turns what can go wrong on the way (a refused connection, a certificate that
does not verify, a full disk, an HTTP 503) into a StreamSendError; the delivery service keeps
the message as the destination's last error, shows it on the audit page and logs it. Messages
name files and addresses, never what a key, certificate or token file holds.
"""

from __future__ import annotations

import errno
import ssl
import time

# A receiver that reset the connection shows as any of these, depending on which call met it
# (a write, the shutdown after it, or the wait for its close).
CUT_OFF = {errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN, errno.ECONNABORTED}


class StreamSendError(Exception):
    """The receiver did not (provably) take the batch: the cursor stays where it is."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def network_error(exc: BaseException, where: str, *, ca_file: str = "") -> StreamSendError:
    """A socket or TLS failure talking to `where` (host:port), as a StreamSendError."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        trust = f"ca_file {ca_file}" if ca_file else "the system's trust store"
        return StreamSendError(
            f"TLS: the certificate of {where} is not trusted ({exc.verify_message}; "
            f"checked against {trust})"
        )
    if isinstance(exc, ssl.SSLError):
        return StreamSendError(f"TLS with {where} failed: {exc.reason or exc}")
    if isinstance(exc, TimeoutError):
        return StreamSendError(f"{where} did not answer in time")
    if isinstance(exc, ConnectionRefusedError):
        return StreamSendError(f"{where} refused the connection (is the receiver running?)")
    if isinstance(exc, ConnectionResetError | BrokenPipeError) or (
        isinstance(exc, OSError) and exc.errno in CUT_OFF
    ):
        return StreamSendError(f"{where} closed the connection before it had read everything sent")
    if isinstance(exc, OSError) and exc.strerror:
        return StreamSendError(f"{where}: {exc.strerror}")
    return StreamSendError(f"{where}: {type(exc).__name__}: {exc}")


class Deadline:
    """The time one send may take in all, handed out to each blocking step as its timeout, so
    a send cannot outlive the lease that keeps a second worker off the destination."""

    def __init__(self, seconds: float) -> None:
        self.ends = time.monotonic() + seconds

    def remaining(self) -> float:
        left = self.ends - time.monotonic()
        if left <= 0:
            raise TimeoutError("the send ran out of time")
        return left
