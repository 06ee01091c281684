"""What `curl` on the host reaches: connecting to a server, checking the key, routing a path."""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .. import catalog
from . import rotation_agent
from .completions import Pending, detokenize, invocation_is_chat, plan, tokenize
from .metrics import metrics
from .responses import Response, empty, json_response

if TYPE_CHECKING:
    from ..state import Machine, Run, Unit

LOCAL_HOSTS = {"127.0.0.1", "localhost", "0.0.0.0", "::1", "[::1]"}  # noqa: S104 - a URL, not a bind


def request(
    machine: Machine, method: str, url: str, headers: dict[str, str], body: str | None
) -> tuple[Response | Pending | None, str, int]:
    """One HTTP exchange: (response, "", 0) or (None, curl's error text, curl's exit code).

    A completion comes back Pending: its response exists once the engine has generated it.
    """
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None, "URL rejected: Port number was not a decimal number between 0 and 65535", 3
    host = parts.hostname or ""
    if parts.scheme not in ("http", "https"):
        return None, f'Protocol "{parts.scheme}" not supported', 1
    refused = (
        None,
        f"Failed to connect to {host} port {port} after 0 ms: Couldn't connect to server",
        7,
    )
    if host not in LOCAL_HOSTS and not machine.binds_address(host):
        if re.fullmatch(r"[0-9.]+", host):
            return (
                None,
                f"Failed to connect to {host} port {port} after 5002 ms: Timeout was reached",
                28,
            )
        return None, f"Could not resolve host: {host}", 6
    if port == rotation_agent.AGENT_PORT and host in LOCAL_HOSTS and parts.scheme == "http":
        return rotation_agent.handle(machine, method, parts.path or "/"), "", 0
    # A server answers only on the addresses it bound (--host), and not at all on --uds or
    # --headless: curl then finds the port closed.
    served = machine.server_at(host, port)
    if served is None:
        return refused
    unit, run = served
    if parts.scheme == "https":
        return None, "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to localhost:443 ", 35
    return handle(machine, unit, run, method, parts.path or "/", body, headers), "", 0


def _authorized(run: Run, path: str, headers: dict[str, str]) -> bool:
    """vLLM's --api-key check: only /v1 routes need `Authorization: Bearer KEY` (/health,
    /metrics, /tokenize and /invocations, which serves completions, answer without it)."""
    engine = run.engine
    if engine is None or not engine.api_key_sha256 or not path.startswith("/v1"):
        return True
    scheme, _, token = headers.get("authorization", "").partition(" ")
    digest = hashlib.sha256(token.strip().encode()).hexdigest()
    return scheme.lower() == "bearer" and digest in engine.api_key_sha256


# The routes of vLLM 0.32's API server (as it lists them at startup: the real-engine tier's
# journal capture) that the simulator answers, in that order, one entry per registration; any
# other path is FastAPI's 404.
ROUTE_TABLE: tuple[tuple[str, str], ...] = (
    ("/load", "GET"),
    ("/version", "GET"),
    ("/health", "GET"),
    ("/metrics", "GET"),
    ("/tokenize", "POST"),
    ("/detokenize", "POST"),
    ("/v1/models", "GET"),
    ("/ping", "GET"),
    ("/ping", "POST"),
    ("/invocations", "POST"),
    ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"),
)
ROUTES: dict[str, tuple[str, ...]] = {}
for _path, _method in ROUTE_TABLE:
    ROUTES[_path] = (*ROUTES.get(_path, ()), _method)
METRICS_CONTENT_TYPE = "text/plain; version=1.0.0; charset=utf-8"
# What a draining server still answers (vLLM's middleware exempts these paths).
DRAINING_ANSWERS = frozenset({"/metrics", "/live"})


def handle(
    machine: Machine,
    unit: Unit,
    run: Run,
    method: str,
    path: str,
    body: str | None,
    headers: dict[str, str] | None = None,
) -> Response | Pending:
    return _route(machine, unit, run, method, path, body, headers or {})


def _route(
    machine: Machine,
    unit: Unit,
    run: Run,
    method: str,
    path: str,
    body: str | None,
    headers: dict[str, str],
) -> Response | Pending:
    engine = run.engine
    assert engine is not None
    if run.draining_since is not None and path not in DRAINING_ANSWERS:
        # vLLM's ServiceUnavailableMiddleware while it drains on SIGTERM (--shutdown-timeout):
        # every request but liveness and metrics is refused, before any other check.
        return json_response(503, {"error": "Service Unavailable"})
    if not _authorized(run, path, headers):
        return json_response(401, {"error": "Unauthorized"})
    if path not in ROUTES:
        return json_response(404, {"detail": "Not Found"})
    if method not in ROUTES[path]:
        return json_response(405, {"detail": "Method Not Allowed"})
    if path in ("/health", "/ping"):
        return empty(200)
    if path == "/load":
        # vLLM counts requests here only with --enable-server-load-tracking; otherwise 0.
        return json_response(200, {"server_load": 0})
    if path == "/version":
        return json_response(200, {"version": catalog.VLLM_VERSION})
    if path == "/v1/models":
        return json_response(200, _models(machine, run))
    if path == "/metrics":
        return Response(200, metrics(machine, run), METRICS_CONTENT_TYPE)
    if path == "/tokenize":
        return tokenize(machine, run, body)
    if path == "/detokenize":
        return detokenize(run, body)
    if path == "/invocations":
        chat = invocation_is_chat(body)
        if isinstance(chat, Response):
            return chat
    else:
        chat = path.endswith("chat/completions")
    answer = plan(machine, run, body, chat=chat)
    if isinstance(answer, Response):
        return answer
    return Pending(machine, unit.name, run, answer)


def _models(machine: Machine, run: Run) -> dict[str, Any]:
    engine = run.engine
    assert engine is not None
    created = int(time.time())
    return {
        "object": "list",
        "data": [  # one card per --served-model-name, all the same model
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": engine.model_path,
                "parent": None,
                "max_model_len": machine.max_model_len(engine),
                "permission": [
                    {
                        "id": f"modelperm-{uuid.UUID(int=machine.rng.getrandbits(128)).hex}",
                        "object": "model_permission",
                        "created": created,
                        "allow_create_engine": False,
                        "allow_sampling": True,
                        "allow_logprobs": True,
                        "allow_search_indices": False,
                        "allow_view": True,
                        "allow_fine_tuning": False,
                        "organization": "*",
                        "group": None,
                        "is_blocking": False,
                    }
                ],
            }
            for name in engine.served_names or (engine.served_name,)
        ],
    }
