"""An engine that died behind a live API server (vLLM issue 39863: the engine core dies, the
API server keeps answering /health, throughput is 0). Pure: states in, reasons out.

`not_serving_reasons` weighs a unit that runs but does not answer /health (loading, or dead
behind its API server); `engine_reasons` a unit that looks as if it serves (active, /health
200). Levels of the faults from deployments.verdict_table.
"""

from __future__ import annotations

from dataclasses import dataclass

from hosts.choices import Verdict
from hosts.parsers.systemd import parse_systemd_timestamp
from hosts.state import HostState

from . import verdict_table as table
from .verdict_table import Reason, reason

CHANGING, DEGRADED = Verdict.CHANGING, Verdict.DEGRADED

# An engine holds gigabytes on each GPU it uses; a CUDA context alone, or nothing, is below.
ENGINE_MIB = 1024


def engine_reasons(
    unit: str, gpus_needed: int, state: HostState, previous: HostState | None
) -> list[Reason]:
    found = [_gone(unit, gpus_needed, state), _stalled(unit, state, previous)]
    return [r for r in found if r is not None]


def needs_previous(state: HostState) -> bool:
    """Whether any unit has requests waiting and none running: then the stall rule compares
    this probe with the one before."""
    return any(_waiting_idle(state, unit) for unit in state.deployments)


def _gone(unit: str, gpus_needed: int, state: HostState) -> Reason | None:
    """The API answers, but no process of the unit holds GPU memory and no GPU holds an
    engine's worth. Both, so a host whose nvidia-smi cannot see processes (another PID
    namespace) is not called dead while its memory is full."""
    if gpus_needed < 1 or not state.gpus:
        return None
    unreadable = {"gpus", "compute_apps", "processes"} & {p.section for p in state.problems}
    if unreadable:
        return None
    if any(app.unit == unit for app in state.compute_apps):
        return None
    if any((g.memory_used_mib or 0) >= ENGINE_MIB for g in state.gpus):
        return None
    text = (
        f"{unit}'s API server answers, but no process of it holds GPU memory (it needs "
        f"{gpus_needed} GPUs): its engine core and workers are gone"
    )
    return reason("engine_gone", text)


def _waiting_idle(state: HostState, unit: str) -> bool:
    server = state.server(unit)
    return bool(server.requests_waiting) and server.requests_running == 0


def _stalled(unit: str, state: HostState, previous: HostState | None) -> Reason | None:
    if previous is None or not (_waiting_idle(state, unit) and _waiting_idle(previous, unit)):
        return None
    now, before = state.server(unit), previous.server(unit)
    tokens = now.generation_tokens_total
    if tokens is None or tokens != before.generation_tokens_total:
        return None
    waited = ""
    if state.host_time is not None and previous.host_time is not None:
        waited = f" in {max(0, state.host_time - previous.host_time)} s"
    text = (
        f"{unit}: {now.requests_waiting:g} requests waiting, none running, and no token "
        f"generated since the last probe{waited}: the engine answers nothing"
    )
    return reason("engine_stalled", text)


@dataclass(frozen=True)
class ServingUnit:
    """What the not-serving rules read of a unit's evidence (deployments.health.UnitEvidence)."""

    name: str
    port: int | None
    running: str | None  # the change job running on it, as people read it: "change #7 (...)"
    load_timeout_seconds: int


def not_serving_reasons(unit: ServingUnit, state: HostState, active: str) -> list[Reason]:
    """A unit that runs but does not serve. vLLM 0.32 has no listening socket while it loads
    (connection refused, never 503), and answers /health 503 once its engine core has died
    behind a live API server (then exits a few seconds later): the first is loading for as
    long as the deployment gives a model to load, the second is failed at once."""
    name, server = unit.name, state.server(unit.name)
    status = server.health_http_status
    # curl's exit status 7: nothing listens on the port (whatever words its version prints).
    refused = status is None and (server.health_error or "").startswith("curl: (7)")
    port = f"port {unit.port}" if unit.port else "its port"
    said = (
        f"/health answered {status}"
        if status
        else f"{port} refuses connections"
        if refused
        else "/health does not answer"
    )
    if unit.running is not None:
        text = f"{name} is {active}; {said} while {unit.running} loads the model"
        return [Reason(CHANGING, "loading", text)]
    if status == 503:
        text = (
            f"{name} is {active}, but /health answered 503: the engine behind its API server "
            "is not running (vLLM answers 503 once its engine core has died)"
        )
        return _table_reason("engine_dead", text)
    up = _active_seconds(state, name) if refused and active == "active" else None
    limit = unit.load_timeout_seconds
    if up is not None and up > limit:
        text = (
            f"{name} has been active for {_span(up)}, and {port} still refuses connections (a "
            f"model loads within {limit} s here)"
        )
        return _table_reason("port_refused", text)
    if up is not None:
        text = (
            f"{name} started {_span(up)} ago and is loading the model: {port} refuses "
            f"connections until it serves (for up to {limit} s)"
        )
        return [Reason(DEGRADED, "loading", text)]
    return [Reason(DEGRADED, "not_healthy", f"{name} is {active}; {said}")]


def _table_reason(code: str, text: str) -> list[Reason]:
    found = table.reason(code, text)
    return [] if found is None else [found]


def _active_seconds(state: HostState, unit: str) -> int | None:
    """How long the unit has been active, on the host's own clock (None: cannot tell)."""
    since = parse_systemd_timestamp(state.unit_state(unit).active_enter_timestamp)
    if since is None or state.host_time is None:
        return None
    return max(0, state.host_time - int(since.timestamp()))


def _span(seconds: int) -> str:
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"
