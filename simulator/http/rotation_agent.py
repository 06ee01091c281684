"""The load balancer's HTTP agent on each simulated host's loopback, for HTTP drain hooks: the
same balancer `lb-drain` talks to (simulator.tools.lb_drain), answering on 127.0.0.1:9180.

    POST|PUT /v1/backends/<name>/drain     out of rotation (200, the backend's state)
    POST|PUT /v1/backends/<name>/undrain   back in rotation
    GET      /v1/backends/<name>           its state

<name> is the host's own name; any other is the balancer's 404.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..catalog import LB_AGENT_PORT
from .responses import Response, json_response

if TYPE_CHECKING:
    from ..state import Machine

AGENT_PORT = LB_AGENT_PORT
_PATH = re.compile(r"/v1/backends/([^/]+)(?:/(drain|undrain))?")


def handle(machine: Machine, method: str, path: str) -> Response:
    match = _PATH.fullmatch(path)
    if match is None:
        return json_response(404, {"error": "no such route"})
    name, action = match.groups()
    if name != machine.name:
        return json_response(404, {"error": f"no backend {name!r} in this pool"})
    allowed = ("GET",) if action is None else ("POST", "PUT")
    if method not in allowed:
        return json_response(405, {"error": "method not allowed"})
    if action == "drain":
        machine.rotation_out()
    elif action == "undrain":
        machine.rotation_in()
    running, waiting = machine.inflight_running, machine.inflight_waiting
    return json_response(
        200,
        {
            "backend": name,
            "in_rotation": machine.load.in_rotation,
            "in_flight": {"running": running, "waiting": waiting},
        },
    )
