"""The one place that talks HTTP to receivers: a POST with a short timeout, no redirects."""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

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


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A receiver that redirects is misconfigured; following it would also send the signed
    body somewhere nobody configured."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirects)


def _excerpt(stream: Any) -> str:
    try:
        return stream.read(EXCERPT_BYTES).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException):
        return ""


def post(url: str, body: bytes, headers: dict[str, str], *, timeout: float) -> SendResult:
    """POST `body`; never raises for network trouble, which is a normal, recorded outcome."""
    if urlsplit(url).scheme not in ("http", "https"):
        return SendResult(status_code=None, duration_ms=0, error="refused: not an http(s) URL")
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
    started = time.monotonic()

    def took() -> int:
        return round((time.monotonic() - started) * 1000)

    try:
        with _opener.open(request, timeout=timeout) as response:
            return SendResult(
                status_code=response.status, duration_ms=took(), excerpt=_excerpt(response)
            )
    except urllib.error.HTTPError as exc:  # a non-2xx answer, redirects included
        with exc:
            return SendResult(
                status_code=exc.code,
                duration_ms=took(),
                excerpt=_excerpt(exc),
                error=f"HTTP {exc.code} {exc.reason}",
            )
    except urllib.error.URLError as exc:
        return SendResult(status_code=None, duration_ms=took(), error=f"{exc.reason}")
    except (TimeoutError, OSError, http.client.HTTPException, ValueError) as exc:
        message = "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
        return SendResult(status_code=None, duration_ms=took(), error=message)
