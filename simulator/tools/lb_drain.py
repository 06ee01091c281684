"""lb-drain: the simulated hosts' load-balancer client, for drain hooks to call.

A stand-in for whatever an operator's balancer offers (an HAProxy runtime socket, a Consul or
Envoy agent, a cloud balancer's CLI): it takes this host out of the rotation, so the balancer
stops sending it requests and those in flight finish (simulator.state.load), and puts it back.
Installed on every simulated host as /usr/local/bin/lb-drain:

    lb-drain out [--backend NAME]     no new requests; those in flight finish
    lb-drain in [--backend NAME]      back in rotation: the balancer's load returns
    lb-drain status [--backend NAME]  in or out, and what is in flight

`--backend` names the host in the balancer's pool (its host name); another name is refused,
as a balancer refuses a backend it does not have. The same balancer answers HTTP on the host's
loopback (simulator.http.rotation_agent).
"""

from __future__ import annotations

from ..catalog import LB_DRAIN as PATH
from .interface import Context, Result

__all__ = ["PATH", "USAGE", "lb_drain"]
USAGE = "usage: lb-drain out|in|status [--backend NAME]\n"


def lb_drain(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    machine = ctx.machine
    args = argv[1:]
    if args in (["-h"], ["--help"]):
        return result.out(USAGE)
    verb, rest = (args[0], args[1:]) if args else ("", [])
    backend = machine.name
    if rest[:1] == ["--backend"] and len(rest) == 2:
        backend = rest[1]
    elif len(rest) == 1 and rest[0].startswith("--backend="):
        backend = rest[0].partition("=")[2]
    elif rest or verb not in ("out", "in", "status"):
        return result.err(USAGE).exit(2)
    if backend != machine.name:
        return result.err(f"lb-drain: no backend {backend!r} in this balancer's pool\n").exit(1)
    if verb == "out":
        machine.rotation_out()
    elif verb == "in":
        machine.rotation_in()
    running, waiting = machine.inflight_running, machine.inflight_waiting
    where = "in rotation" if machine.load.in_rotation else "out of rotation"
    return result.out(
        f"{backend}: {where}; {running + waiting} requests in flight "
        f"({running} running, {waiting} waiting)\n"
    )
