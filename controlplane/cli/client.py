"""The HTTP side: one session with the token, the API's answers as JSON, its errors as
CliError with the server's own words and the exit code they map to."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit

import requests

from .config import API_PREFIX, Config
from .exits import CliError, ExitCode, code_for

try:
    VERSION = metadata.version("gpu-controlplane")
except metadata.PackageNotFoundError:  # run from a source tree that was never installed
    VERSION = "dev"
# Reads answer in well under a second; a synchronous probe may take a few minutes.
TIMEOUT = (10.0, 60.0)
LONG_TIMEOUT = (10.0, 600.0)
Params = Mapping[str, Any] | None


class Client:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.session = requests.Session()
        # Proxies and netrc credentials from the environment stay out of it: the token is the
        # only credential, and it goes to CPCTL_URL alone.
        self.session.trust_env = False
        self.session.headers.update(
            {
                "Authorization": f"Bearer {config.token}",
                "Accept": "application/json",
                # The audit log keeps each request's user agent: events say they came from here.
                "User-Agent": f"cpctl/{VERSION}",
            }
        )

    # --- requests -----------------------------------------------------------------------------

    def get(self, path: str, params: Params = None) -> Any:
        return self._json(self._send("GET", path, params=params))

    def post(self, path: str, body: Any = None, params: Params = None, long: bool = False) -> Any:
        response = self._send(
            "POST", path, params=params, json=body if body is not None else {}, long=long
        )
        return self._json(response)

    def delete(self, path: str) -> Any:
        return self._json(self._send("DELETE", path))

    def pages(self, path: str, params: Params = None, limit: int | None = None) -> Iterator[Any]:
        """The items of a paged list, following `next` until `limit` items (None: all)."""
        count = 0
        url: str | None = path
        query = params
        while url is not None:
            page = self.get(url, query)
            query = None  # `next` carries the query
            for item in page.get("results", []):
                if limit is not None and count >= limit:
                    return
                count += 1
                yield item
            url = self._same_server(page.get("next"))

    def stream(self, path: str, params: Params = None) -> Iterator[bytes]:
        response = self._send("GET", path, params=params, stream=True, accept="*/*", long=True)
        with response:
            yield from response.iter_content(chunk_size=64 * 1024)

    # --- the parts ----------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        if path.startswith(f"{API_PREFIX}/"):
            return self.config.url + path
        return self.config.api + path.lstrip("/")

    def _same_server(self, link: str | None) -> str | None:
        """A `next` link as a path on CPCTL_URL: the token is never sent wherever an answer
        points (a proxy may also have made the server build its links with the wrong host)."""
        if not link:
            return None
        parts = urlsplit(link)
        prefix = urlsplit(self.config.url).path
        path = parts.path[len(prefix) :] if prefix and parts.path.startswith(prefix) else parts.path
        return f"{path}?{parts.query}" if parts.query else path

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Params = None,
        json: Any = None,
        stream: bool = False,
        accept: str | None = None,
        long: bool = False,
    ) -> requests.Response:
        url = self._url(path)
        headers = {"Accept": accept} if accept else None
        try:
            response = self.session.request(
                method,
                url,
                params=params,
                json=json,
                headers=headers,
                stream=stream,
                timeout=LONG_TIMEOUT if long else TIMEOUT,
                allow_redirects=False,
            )
        except requests.exceptions.Timeout as exc:
            raise CliError(
                f"{self.config.url} did not answer in time ({type(exc).__name__})",
                ExitCode.UNREACHABLE,
            ) from exc
        except requests.exceptions.ConnectionError as exc:
            raise CliError(
                f"cannot reach {self.config.url}: {reason_of(exc)}", ExitCode.UNREACHABLE
            ) from exc
        if response.status_code >= 300:
            raise self._error(response, path)
        return response

    def _json(self, response: requests.Response) -> Any:
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise CliError(
                f"{response.url} answered {response.status_code} with something that is not "
                "JSON: is CPCTL_URL the control plane's address?",
                ExitCode.ERROR,
            ) from exc

    def _error(self, response: requests.Response, path: str) -> CliError:
        status = response.status_code
        body: Any = None
        if "json" in response.headers.get("Content-Type", ""):
            try:
                body = response.json()
            except ValueError:
                body = None
        if 300 <= status < 400:
            where = response.headers.get("Location", "?")
            return CliError(
                f"the server sent {path} elsewhere ({status} to {where}): is CPCTL_URL the "
                "control plane's address?",
                ExitCode.ERROR,
            )
        if body is None and status == 404:
            # Not the API's "no such row" (that is JSON): this server has no such endpoint.
            return CliError(
                f"this server has no {API_PREFIX}/{path.lstrip('/').split('?')[0]} "
                "(an older version, or CPCTL_URL is not the control plane)",
                ExitCode.NOT_FOUND,
                body={"detail": "no such endpoint", "code": "no_endpoint"},
            )
        return CliError(describe(status, body), code_for(status, body), body)


def reason_of(exc: Exception) -> str:
    """The innermost cause of a connection error, without urllib3's object reprs."""
    inner: BaseException = exc
    while inner.__cause__ is not None or inner.__context__ is not None:
        inner = inner.__cause__ or inner.__context__  # type: ignore[assignment]
    text = str(inner)
    return text.split(": ", 1)[-1] if "object at 0x" in text else text


def describe(status: int, body: Any) -> str:
    """The server's refusal in its own words, with what its machine-readable fields ask for."""
    if isinstance(body, dict) and "detail" in body:
        code = body.get("code")
        text = f"{body['detail']}" + (f" [{code}]" if code else "")
        if body.get("needs_acknowledgement"):
            text += "\n  requests are in flight: add --acknowledge-busy to go ahead anyway"
        if body.get("needs_unknown_acknowledgement"):
            unknown = ", ".join(body.get("unknown") or [])
            text += f"\n  the snapshot could not read: {unknown}; add --acknowledge-unknown"
        return text
    if isinstance(body, dict):
        lines = []
        for field, problems in body.items():
            said = problems if isinstance(problems, list) else [problems]
            lines.append(f"{field}: {' '.join(str(p) for p in said)}")
        return "refused: " + "; ".join(lines)
    if isinstance(body, list):
        return "refused: " + "; ".join(str(p) for p in body)
    return f"the server answered HTTP {status}"
