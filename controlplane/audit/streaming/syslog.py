"""Syslog over TCP: RFC 5424 messages, octet-counted (RFC 6587 3.4.1), over TLS (RFC 5425)
unless a destination turns it off.

What TCP syslog can confirm, and what it cannot. The protocol has no acknowledgement: a write
that returns means only that this machine's kernel buffered the bytes. So each batch goes over
a connection of its own, and it counts as taken only when the receiver, after everything, has
closed its side in order: we end the stream (TLS close_notify, or a TCP FIN), wait for the
receiver to close (a receiver closes once it has read up to our end, and a Linux receiver that
closes with unread bytes sends a reset, not a close), then wait until the kernel says every
byte we sent was acknowledged and no reset came. That proves the receiving process read every
message into its own queue. It does not prove the receiver wrote them to disk: a receiver that
crashes after reading loses what its memory held. rsyslog's disk-assisted queues close most of
that window; RELP, which acknowledges each message, closes it but is not spoken here.
"""

from __future__ import annotations

import contextlib
import fcntl
import socket
import ssl
import struct
import termios
import time
from functools import cache
from typing import Any

from controlplane.settings_parts.audit_streams import StreamDestination

from . import records
from .errors import Deadline, StreamSendError, network_error
from .tls import client_context

NILVALUE = "-"
ACCEPTANCE_WAIT = 0.25  # seconds, at least, for a TLS 1.3 receiver to refuse our certificate
WRITE_CHUNK = 64 * 1024


def _printable(value: str, limit: int) -> str:
    """RFC 5424 header fields are printable US-ASCII without spaces, or the NILVALUE."""
    text = "".join(c if "!" <= c <= "~" else "_" for c in value)[:limit]
    return text or NILVALUE


def _param_value(value: str) -> str:
    # RFC 5424 6.3.3: '"', '\' and ']' are escaped with a backslash inside PARAM-VALUE.
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("]", "\\]")


@cache
def _this_host() -> str:
    return socket.getfqdn()


def message(record: dict[str, Any], destination: StreamDestination) -> bytes:
    """One RFC 5424 message for a record: PRI by the destination's facility and the action's
    severity, the event's own time, MSGID the action, the chain links in structured data
    (SD-ID `destination.sd_id`), and the whole record as ASCII JSON for MSG. A record too big
    for `max_message_bytes` goes without its data (records.without_data)."""
    severity = records.severity_of(record["action"])
    params = [
        ("schema", records.SCHEMA),
        ("seq", str(record["seq"])),
        ("hash", record["hash"]),
        ("prev_hash", record["prev_hash"]),
    ]
    if record["redelivery"]:
        params.append(("redelivery", "1"))
    sd = "[{} {}]".format(
        destination.sd_id, " ".join(f'{k}="{_param_value(v)}"' for k, v in params)
    )
    header = " ".join(
        (
            f"<{destination.facility * 8 + severity}>1",
            record["created_at"],  # RFC 3339, UTC, at most microseconds (RFC 5424 6.2.3)
            _printable(destination.hostname or _this_host(), 255),
            _printable(destination.app_name, 48),
            NILVALUE,  # PROCID: the event is the control plane's, not one process's
            _printable(record["action"], 32),
            sd,
        )
    )
    text = f"{header} {records.ascii_json(record)}".encode("ascii")
    if len(text) > destination.max_message_bytes and record.get("data") is not None:
        return message(records.without_data(record), destination)
    return text


def frame(msg: bytes) -> bytes:
    """Octet counting: the message's length in bytes, a space, the message (RFC 6587 3.4.1)."""
    return b"%d %s" % (len(msg), msg)


# --- sending ----------------------------------------------------------------------------------


def send(destination: StreamDestination, batch: list[dict[str, Any]], deadline: Deadline) -> None:
    """Send `batch` over one connection and return once the receiver provably read all of it,
    or raise StreamSendError."""
    where = f"{destination.host}:{destination.port}"
    payload = b"".join(frame(message(r, destination)) for r in batch)
    context = client_context(destination) if destination.tls else None
    started = time.monotonic()
    try:
        sock = socket.create_connection(
            (destination.host, destination.port), timeout=deadline.remaining()
        )
    except OSError as exc:
        raise network_error(exc, where) from None
    round_trip = time.monotonic() - started
    try:
        if context is not None:
            sock.settimeout(deadline.remaining())
            sock = context.wrap_socket(
                sock, server_hostname=destination.server_name or destination.host
            )
            _await_acceptance(sock, round_trip, deadline, where)
        for start in range(0, len(payload), WRITE_CHUNK):
            sock.settimeout(deadline.remaining())
            sock.sendall(payload[start : start + WRITE_CHUNK])
        _end_and_confirm(sock, deadline)
    except (OSError, ValueError) as exc:  # ssl.SSLError and TimeoutError are OSErrors
        raise network_error(exc, where, ca_file=destination.ca_file) from None
    finally:
        sock.close()


def _await_acceptance(
    sock: ssl.SSLSocket, round_trip: float, deadline: Deadline, where: str
) -> None:
    """Under TLS 1.3 the client's handshake ends before the receiver has judged its
    certificate, and rsyslog judges it after the handshake, then simply closes. Data sent
    straight away could be read and dropped by a receiver that did that, and its close would
    look like a clean end. So wait a few round trips for such a close before sending."""
    if sock.version() != "TLSv1.3":
        return  # TLS 1.2: the receiver's Finished came after it checked our certificate
    # A quarter second at least: the receiver's own check takes a moment on a busy machine.
    sock.settimeout(min(deadline.remaining(), max(ACCEPTANCE_WAIT, 4 * round_trip)))
    try:
        data = sock.recv(1)
    except TimeoutError:
        return  # nothing said: the receiver kept the connection
    except ssl.SSLError as exc:
        raise StreamSendError(
            f"{where} ended the TLS session after the handshake ({exc.reason or exc}): did it "
            "refuse the client certificate (cert_file), or ask for one?"
        ) from None
    if not data:
        raise StreamSendError(
            f"{where} closed the connection right after the TLS handshake: did it refuse the "
            "client certificate (cert_file), or ask for one that was not configured?"
        )
    raise StreamSendError(f"{where} sent data, which a syslog receiver never does")


def _end_and_confirm(sock: socket.socket, deadline: Deadline) -> None:
    if isinstance(sock, ssl.SSLSocket):
        sock.settimeout(deadline.remaining())
        # close_notify, then the receiver's close_notify or its close (rsyslog's GnuTLS
        # driver just closes): either way, it has read up to our end.
        with contextlib.suppress(ssl.SSLEOFError, ssl.SSLZeroReturnError):
            sock.unwrap()
    else:
        sock.shutdown(socket.SHUT_WR)
        _await_close(sock, deadline)
    _await_acknowledged(sock, deadline)


def _await_close(sock: socket.socket, deadline: Deadline) -> None:
    """Read until the receiver closes its side (a syslog receiver sends nothing else)."""
    while True:
        sock.settimeout(deadline.remaining())
        if not sock.recv(4096):
            return


def _unacknowledged(sock: socket.socket) -> int | None:
    """Bytes we sent that the receiver's kernel has not acknowledged (Linux SIOCOUTQ, which is
    TIOCOUTQ); None where the kernel does not say."""
    try:
        out = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, struct.pack("i", 0))
    except OSError:
        return None
    return int(struct.unpack("i", out)[0])


def _await_acknowledged(sock: socket.socket, deadline: Deadline) -> None:
    """Wait until every byte sent is acknowledged and no reset came: a receiver that closed
    while our last bytes were on the way answers them with a reset, and they were not read."""
    while True:
        error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            raise ConnectionResetError(error, "reset by the receiver")
        pending = _unacknowledged(sock)
        if not pending:
            return
        deadline.remaining()
        time.sleep(0.005)
