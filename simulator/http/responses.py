"""An HTTP response as uvicorn sends it, and the JSON bodies vLLM's routes answer with."""

from __future__ import annotations

import json
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any

_STATUS_TEXT = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def status_text(status: int) -> str:
    return _STATUS_TEXT.get(status, "")


@dataclass
class Response:
    status: int
    body: str = ""
    content_type: str | None = "application/json"  # None: no content-type header at all

    def head(self) -> str:
        kind = f"content-type: {self.content_type}\r\n" if self.content_type else ""
        return (
            f"HTTP/1.1 {self.status} {_STATUS_TEXT.get(self.status, '')}\r\n"
            f"date: {formatdate(usegmt=True)}\r\n"
            "server: uvicorn\r\n"
            f"content-length: {len(self.body.encode())}\r\n"
            f"{kind}"
            "\r\n"
        )


def empty(status: int = 200) -> Response:
    """What vLLM's /health and /ping answer: a status, no body and no content type."""
    return Response(status, "", None)


def json_response(status: int, payload: Any) -> Response:
    return Response(status, json.dumps(payload, separators=(",", ":"), ensure_ascii=False))


def error(status: int, message: str, kind: str, param: str | None = None) -> Response:
    return json_response(
        status, {"error": {"message": message, "type": kind, "param": param, "code": status}}
    )
