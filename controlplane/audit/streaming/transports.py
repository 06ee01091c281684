"""The stream's other two transports, JSON Lines to a file and to an HTTP(S) collector, and the
one table that says which function sends to which kind of destination.

File: appended with O_APPEND, under an exclusive lock, then fsync'd (and the directory too when
the file is new), so a batch counts as taken only once it is on disk. The file is opened by its
path for every batch and never held open, so rotation by renaming (logrotate's default) simply
makes the next batch start a new file, and copytruncate's truncation is appended after. A batch
cut short by a crash leaves a partial last line; the next batch starts on a new line, and the
records of the cut batch come again, flagged as redeliveries.

HTTP: one POST per batch (application/x-ndjson); any 2xx means the collector took the batch,
anything else, a redirect included (not followed), that it did not. The destination comes from
the deployment's settings, not a page, and collectors live on internal networks: so the webhook
rule that keeps page-typed URLs off internal addresses (controlplane.notifications.destinations,
a layer above the audit log) does not apply; its refusal of credentials in the URL does.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from controlplane.redaction import redact_text
from controlplane.settings_parts.audit_streams import FILE, HTTP, SYSLOG, StreamDestination

from . import records, syslog
from .errors import Deadline, StreamSendError, network_error
from .tls import client_context

USER_AGENT = "gpu-controlplane-audit-stream/1"
EXCERPT_CHARS = 200

Sender = Callable[[StreamDestination, list[dict[str, Any]], Deadline], None]


# --- JSON Lines to a file ------------------------------------------------------------------------


def _starts_a_line(fd: int) -> bytes:
    """A newline when the file ends inside a line (a batch cut short), else nothing."""
    size = os.fstat(fd).st_size
    if size == 0:
        return b""
    return b"" if os.pread(fd, 1, size - 1) == b"\n" else b"\n"


def append_file(
    destination: StreamDestination, batch: list[dict[str, Any]], deadline: Deadline
) -> None:
    path = Path(destination.path)
    body = b"".join(records.jsonl_line(r) for r in batch)
    try:
        created = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
    except OSError as exc:
        raise StreamSendError(f"{path}: {exc.strerror or exc}") from None
    try:
        # Another writer of the same file (a second control plane, a tool) cannot interleave
        # its lines with ours mid-batch.
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = memoryview(_starts_a_line(fd) + body)
        while data:
            written = os.write(fd, data)
            data = data[written:]
        os.fsync(fd)
    except OSError as exc:
        raise StreamSendError(f"{path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if created:
        with contextlib.suppress(OSError):  # the file itself is safe; its name is best effort
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


# --- JSON Lines over HTTP(S) -------------------------------------------------------------------


def _authorization(destination: StreamDestination) -> str | None:
    if not destination.authorization_file:
        return None
    try:
        value = Path(destination.authorization_file).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise StreamSendError(
            f"authorization_file {destination.authorization_file}: {why}"
        ) from None
    if not value or "\n" in value or "\r" in value:
        raise StreamSendError(
            f"authorization_file {destination.authorization_file} must hold one line: the "
            "Authorization header's value (e.g. 'Bearer ...')"
        )
    return value


def post(destination: StreamDestination, batch: list[dict[str, Any]], deadline: Deadline) -> None:
    parts = urlsplit(destination.url)
    where = destination.where()
    headers = {
        "Content-Type": "application/x-ndjson",
        "User-Agent": USER_AGENT,
        "X-Controlplane-Audit-Schema": records.SCHEMA,
        "X-Controlplane-Audit-Seq": f"{batch[0]['seq']}-{batch[-1]['seq']}",
    }
    authorization = _authorization(destination)
    if authorization:
        headers["Authorization"] = authorization
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(
            parts.hostname or "",
            parts.port,
            timeout=deadline.remaining(),
            context=client_context(destination),
        )
    else:
        connection = http.client.HTTPConnection(
            parts.hostname or "", parts.port, timeout=deadline.remaining()
        )
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    body = b"".join(records.jsonl_line(r) for r in batch)
    try:
        connection.request("POST", target, body=body, headers=headers)
        response = connection.getresponse()
        excerpt = response.read(EXCERPT_CHARS).decode("utf-8", "replace").strip()
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise network_error(exc, where, ca_file=destination.ca_file) from None
    finally:
        connection.close()
    if 200 <= response.status < 300:
        return
    said = f": {redact_text(excerpt)}" if excerpt else ""
    if 300 <= response.status < 400:
        raise StreamSendError(
            f"{where} answered HTTP {response.status} (a redirect, not followed: point the "
            "destination at the final URL)"
        )
    raise StreamSendError(f"{where} answered HTTP {response.status} {response.reason}{said}")


# --- which sends where -------------------------------------------------------------------------

SENDERS: dict[str, Sender] = {SYSLOG: syslog.send, FILE: append_file, HTTP: post}


def sender_for(kind: str) -> Sender:
    """The transport for a kind of destination; an unknown kind is a bug, never a default."""
    try:
        return SENDERS[kind]
    except KeyError:
        raise LookupError(f"no transport for audit stream kind {kind!r}") from None
