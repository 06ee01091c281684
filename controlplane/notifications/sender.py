"""The one place that talks HTTP to receivers: a POST with a short timeout, to the address the
destination rule checked, no redirects.

The connection goes to one of `Destination.addresses`, which the rule resolved and checked, and
the name is never looked up again, so it cannot be re-pointed between the check and the
connection. The request still speaks to the name: the Host header, the TLS server name (SNI)
and the certificate's verification are all for the host the URL names, with the system's trust
store. Proxy variables (HTTP_PROXY, HTTPS_PROXY) are not used: a proxy would resolve the name
itself, after the check.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .destinations import Destination

EXCERPT_BYTES = 500


@dataclass(frozen=True)
class SendResult:
    status_code: int | None
    duration_ms: int
    excerpt: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300

    @property
    def redirected(self) -> bool:
        """The receiver answered with a redirect, which is not followed: it would send the signed
        body somewhere nobody configured (or checked)."""
        return self.status_code is not None and 300 <= self.status_code < 400


class _PinnedConnection(http.client.HTTPConnection):
    """HTTP(S) to `destination.host`, over a socket connected to one of its checked addresses."""

    def __init__(
        self, destination: Destination, *, timeout: float, tls: ssl.SSLContext | None
    ) -> None:
        super().__init__(destination.host, destination.port, timeout=timeout)
        self.destination = destination
        self.tls = tls
        # The Host header leaves out the port only when it is the scheme's own.
        self.default_port = 443 if tls is not None else 80

    def connect(self) -> None:
        last: OSError | None = None
        for address in self.destination.addresses:
            try:
                sock = socket.create_connection((address, self.port), self.timeout)
            except OSError as exc:
                last = exc
                continue
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.tls is not None:
                    sock = self.tls.wrap_socket(sock, server_hostname=self.host)
            except BaseException:
                sock.close()
                raise
            self.sock = sock
            return
        raise last or OSError(f"{self.host} has no address to connect to")


def _excerpt(response: http.client.HTTPResponse) -> str:
    try:
        return response.read(EXCERPT_BYTES).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        return ""


def _redirect_error(response: http.client.HTTPResponse) -> str:
    location = response.getheader("Location") or ""
    parts = urlsplit(location)
    # Where it points, without the path (a receiver's path may be a credential too).
    where = f" to {parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}/" if parts.netloc else ""
    return (
        f"HTTP {response.status} {response.reason}: the receiver redirects{where}; redirects "
        "are not followed (point the endpoint at the final URL)"
    )


def _network_error(exc: BaseException, destination: Destination) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS certificate not valid for {destination.host}: {exc.verify_message}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return f"{type(exc).__name__}: {exc}"


def post(
    destination: Destination, url: str, body: bytes, headers: dict[str, str], *, timeout: float
) -> SendResult:
    """POST `body` to `url`, connecting only to `destination` (from destination_check(url));
    never raises for network trouble, which is a normal, recorded outcome."""
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    tls = ssl.create_default_context() if destination.scheme == "https" else None
    connection = _PinnedConnection(destination, timeout=timeout, tls=tls)
    started = time.monotonic()

    def took() -> int:
        return round((time.monotonic() - started) * 1000)

    try:
        connection.request("POST", target, body=body, headers=headers)
        response = connection.getresponse()
        excerpt = _excerpt(response)
        result: dict[str, Any] = {"status_code": response.status, "excerpt": excerpt}
        if 300 <= response.status < 400:
            result["error"] = _redirect_error(response)
        elif not 200 <= response.status < 300:
            result["error"] = f"HTTP {response.status} {response.reason}"
        return SendResult(duration_ms=took(), **result)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return SendResult(
            status_code=None, duration_ms=took(), error=_network_error(exc, destination)
        )
    finally:
        connection.close()
