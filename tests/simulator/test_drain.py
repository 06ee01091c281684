"""Draining a simulated host: the load balancer's client (`lb-drain`) and HTTP agent take it out
of rotation, so its requests in flight finish and no new ones come; a vLLM with
--shutdown-timeout lets what is in flight finish when systemd stops it (refusing new requests
with 503, answering /metrics), one without aborts at once, and TimeoutStopSec= kills a stop that
takes longer."""

from __future__ import annotations

import json

from simulator import catalog
from tests.simulator.on_machine import Host, host

UNIT = catalog.DEFAULT_UNIT
METRICS = "curl -sS http://127.0.0.1:8000/metrics"


def inflight(h: Host) -> tuple[int, int]:
    """(running, waiting) as the server's /metrics says."""
    lines = h.out(METRICS)
    running = next(line for line in lines if line.startswith("vllm:num_requests_running"))
    waiting = next(line for line in lines if line.startswith("vllm:num_requests_waiting"))
    return int(float(running.split()[-1])), int(float(waiting.split()[-1]))


def active(h: Host) -> tuple[str, str, str]:
    lines = h.out(f"systemctl show {UNIT} -p ActiveState,SubState,Result")
    values = dict(line.split("=", 1) for line in lines)
    return values["ActiveState"], values["SubState"], values["Result"]


def with_unit(h: Host, *extra: str, stop_timeout: str | None = None) -> None:
    """The default unit rewritten with `extra` engine flags (and TimeoutStopSec=), restarted
    and loaded."""
    machine = h.machine
    text = catalog.unit_file_text(extra_args=extra)
    if stop_timeout is not None:
        text = text.replace("Restart=no\n", f"Restart=no\nTimeoutStopSec={stop_timeout}\n")
    machine.write_file(machine.unit_path(UNIT), text)
    machine.daemon_reload()
    unit = machine.lookup_unit(UNIT)
    assert unit is not None
    machine.restart(unit)
    h.advance(1.0)
    assert active(h)[0] == "active"


def test_out_of_rotation_the_requests_in_flight_finish_and_none_arrive() -> None:
    h = host()
    h.machine.set_inflight(10, 2)
    h.advance(30)
    assert inflight(h) == (10, 2)  # in rotation, the balancer keeps them coming
    assert h.out("/usr/local/bin/lb-drain out --backend gpu-01") == [
        "gpu-01: out of rotation; 12 requests in flight (10 running, 2 waiting)"
    ]
    h.advance(10)
    running, waiting = inflight(h)
    assert waiting == 0 and 0 < running < 10  # the waiting ones took freed slots
    h.advance(25)
    assert inflight(h) == (0, 0)
    assert h.out("lb-drain in") == [
        "gpu-01: in rotation; 12 requests in flight (10 running, 2 waiting)"
    ]
    assert inflight(h) == (10, 2)


def test_lb_drain_refuses_a_backend_it_does_not_have_and_bad_usage() -> None:
    h = host()
    out, err, status = h.run("lb-drain out --backend gpu-02")
    assert (status, out) == (1, "") and "no backend 'gpu-02'" in err
    assert h.machine.load.in_rotation
    out, err, status = h.run("lb-drain sideways")
    assert status == 2 and err.startswith("usage: lb-drain")


def test_the_balancers_http_agent_drains_and_undrains() -> None:
    h = host()
    h.machine.set_inflight(4)
    url = "http://127.0.0.1:9180/v1/backends/gpu-01"
    answer = json.loads(h.out(f"curl -sS -X POST {url}/drain")[0])
    assert answer["in_rotation"] is False and answer["in_flight"]["running"] == 4
    h.advance(60)
    assert inflight(h) == (0, 0)
    answer = json.loads(h.out(f"curl -sS -X PUT {url}/undrain")[0])
    assert answer["in_rotation"] is True and inflight(h) == (4, 0)
    out, _, _ = h.run(
        "curl -sS -w '%{http_code}' -X POST http://127.0.0.1:9180/v1/backends/x/drain"
    )
    assert out.endswith("404")
    out, _, _ = h.run(f"curl -sS -w '%{{http_code}}' -X DELETE {url}/drain")
    assert out.endswith("405") and h.machine.load.in_rotation


def test_without_a_shutdown_timeout_a_stop_aborts_what_is_in_flight() -> None:
    h = host()
    h.machine.set_inflight(6)
    h.out(f"systemctl stop --no-block {UNIT}")
    assert active(h) == ("inactive", "dead", "success")
    h.out(f"systemctl start --no-block {UNIT}")
    h.advance(1)
    assert inflight(h) == (6, 0)  # the balancer sends the new server its load again


def test_with_a_shutdown_timeout_a_stop_drains_first() -> None:
    h = host()
    with_unit(h, "--shutdown-timeout", "60")
    h.machine.set_inflight(8)
    h.out(f"systemctl stop --no-block {UNIT}")
    assert active(h) == ("deactivating", "stop-sigterm", "success")
    # Draining, it refuses what is new and still says what is in flight.
    out, _, _ = h.run("curl -sS -w ' %{http_code}' http://127.0.0.1:8000/health")
    assert out.endswith(" 503")
    h.advance(10)
    assert 0 < inflight(h)[0] < 8
    h.advance(11)  # the last request ends at 20 s; vLLM then tears down
    assert active(h)[0] == "deactivating"
    h.advance(2)
    assert active(h) == ("inactive", "dead", "success")
    assert h.machine.inflight_running == 0


def test_a_drain_longer_than_the_shutdown_timeout_is_cut_short() -> None:
    h = host()
    with_unit(h, "--shutdown-timeout", "10")
    h.machine.load.request_seconds = 600
    h.machine.set_inflight(3)
    h.out(f"systemctl stop --no-block {UNIT}")
    h.advance(11)
    assert active(h)[0] == "deactivating"  # 10 s, then its teardown
    h.advance(2)
    assert active(h) == ("inactive", "dead", "success")  # the rest aborted


def test_timeout_stop_sec_kills_a_drain_that_outlasts_it() -> None:
    h = host()
    with_unit(h, "--shutdown-timeout", "120", stop_timeout="30s")
    h.machine.load.request_seconds = 600
    h.machine.set_inflight(3)
    h.out(f"systemctl stop --no-block {UNIT}")
    h.advance(31)
    assert active(h) == ("failed", "failed", "timeout")
    journal = h.out(f"journalctl -u {UNIT} -n 5 --no-pager -o cat")
    assert f"{UNIT}: State 'stop-sigterm' timed out. Killing." in journal
    assert f"{UNIT}: Failed with result 'timeout'." in journal


def test_a_restart_that_drains_starts_the_new_server_once_the_old_one_is_gone() -> None:
    h = host()
    with_unit(h, "--shutdown-timeout", "60")
    old = h.out(f"systemctl show {UNIT} -p MainPID")[0]
    h.machine.set_inflight(2)
    h.out(f"systemctl restart --no-block {UNIT}")
    h.advance(5)
    assert active(h)[0] == "deactivating"
    assert h.out(f"systemctl show {UNIT} -p MainPID")[0] == old
    h.advance(20)
    assert active(h)[0] == "active"
    assert h.out(f"systemctl show {UNIT} -p MainPID")[0] != old


def test_a_blocking_stop_returns_once_the_drain_is_over(make_fleet) -> None:
    """Without --no-block, systemctl waits for the stop job, draining included (over SSH, on
    the fleet's own clock: 20 host seconds are one real second at the tests' time scale)."""
    fleet = make_fleet(1)
    fleet.set_unit_file(
        "gpu-01", UNIT, catalog.unit_file_text(extra_args=("--shutdown-timeout", "60")),
        reload=True,
    )  # fmt: skip
    fleet.restart_unit("gpu-01")
    fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=10)
    fleet.set_inflight("gpu-01", 3)
    _, err, status = fleet.run("gpu-01", f"systemctl stop {UNIT}")
    assert (status, err) == (0, "")
    state = fleet.state("gpu-01")["units"][UNIT]
    assert (state["active_state"], state["result"]) == ("inactive", "success")
