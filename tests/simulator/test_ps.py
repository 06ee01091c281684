"""`ps -e -o pid=,unit=` on a simulated host, over real SSH: procps-ng's exact output."""

from __future__ import annotations

import re

import pytest

from hosts import commands
from simulator import catalog
from tests.fleet import FleetHandle, ssh

UNIT = catalog.DEFAULT_UNIT
PS = commands.join(["ps", "-e", "-o", "pid=,unit="])
USAGE_TAIL = (
    "\n"
    "Usage:\n"
    " ps [options]\n"
    "\n"
    " Try 'ps --help <simple|list|output|threads|misc|all>'\n"
    "  or 'ps --help <s|l|o|t|m|a>'\n"
    " for additional help text.\n"
    "\n"
    "For more details see ps(1).\n"
)


def ps(fleet: FleetHandle, command: str = PS, name: str = "gpu-01", **kw: str) -> list[str]:
    result = ssh(fleet, name, command, **kw)
    assert result.exit_status == 0 and result.stderr == "", result.stderr
    return str(result.stdout).splitlines()


def owners(lines: list[str]) -> dict[int, str]:
    return {int(line[:7]): line[8:] for line in lines}


def test_the_format_is_procps_with_empty_headers(sim_fleet: FleetHandle) -> None:
    lines = ps(sim_fleet)
    # PID right-aligned in procps's 7 columns (pid_max 4194304), one space, the unit, no header.
    assert all(re.fullmatch(r" *\d+ \S+", line) for line in lines)
    assert all(len(line) > 8 and line[7] == " " and line[:7].strip().isdigit() for line in lines)
    assert lines[:3] == ["      1 init.scope", "      2 -", "      3 -"]
    pids = [int(line[:7]) for line in lines]
    assert pids == sorted(pids) and len(set(pids)) == len(pids)
    units = owners(lines)
    assert "systemd-journald.service" in units.values() and "ssh.service" in units.values()
    assert sum(1 for u in units.values() if u == "-") >= 10  # kernel threads
    sessions = {u for u in units.values() if re.fullmatch(r"session-\d+\.scope", u)}
    assert len(sessions) == 1  # this login, with sshd, the shell and ps itself


def test_every_gpu_process_shows_its_unit(sim_fleet: FleetHandle) -> None:
    units = owners(ps(sim_fleet))
    truth = sim_fleet.state("gpu-01")
    apps = truth["compute_apps"]
    main_pid = truth["units"][UNIT]["main_pid"]
    assert [a["pid"] for a in apps] == [main_pid + rank for rank in range(8)]
    assert {units[a["pid"]] for a in apps} == {UNIT}
    assert units[main_pid] == UNIT
    assert sim_fleet.processes("gpu-01")[main_pid] == UNIT

    sim_fleet.restart_unit("gpu-01")
    sim_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=5)
    after = owners(ps(sim_fleet))
    assert main_pid not in after
    new_pid = sim_fleet.state("gpu-01")["units"][UNIT]["main_pid"]
    assert all(after[new_pid + rank] == UNIT for rank in range(8))


def test_comm_column_and_headers(sim_fleet: FleetHandle) -> None:
    lines = ps(sim_fleet, "ps -eo pid=,unit=,comm=")
    assert lines[0] == "      1 init.scope                      systemd"
    main_pid = sim_fleet.state("gpu-01")["units"][UNIT]["main_pid"]
    by_pid = {int(line[:7]): line for line in lines}
    assert by_pid[main_pid].endswith(" VLLM::APIServer")
    assert by_pid[main_pid + 1] == f"{main_pid + 1:>7} {UNIT:<31} VLLM::Worker_TP"  # 15 chars
    assert lines[-1].endswith(" ps")

    lines = ps(sim_fleet, "ps -A -o pid,unit")
    assert lines[0] == "    PID UNIT" and lines[1] == "      1 init.scope"
    lines = ps(sim_fleet, "ps -A -o pid= -o unit=")  # two lists make one
    assert lines[0] == "      1 init.scope" and all(re.fullmatch(r" *\d+ \S+", x) for x in lines)


def test_a_and_e_are_the_same_selection(sim_fleet: FleetHandle) -> None:
    a = owners(ps(sim_fleet, "ps -A -o pid=,unit="))
    e = owners(ps(sim_fleet))
    # Only the login's own processes (a new session each connection) differ.
    same = {
        p: u for p, u in a.items() if not u.startswith("session-") and not u.startswith("user@")
    }
    assert same == {p: u for p, u in e.items() if p in same}


def test_each_connection_is_its_own_session(sim_fleet: FleetHandle) -> None:
    first = {u for u in owners(ps(sim_fleet)).values() if u.startswith("session-")}
    second = {
        u for u in owners(ps(sim_fleet, username="deploy")).values() if u.startswith("session-")
    }
    assert len(first) == len(second) == 1 and first != second


@pytest.mark.parametrize(
    ("command", "error"),
    [
        ("ps -e -o pid=,foo=", 'unknown user-defined format specifier "foo"'),
        ("ps -e -o", "format specification must follow -o"),
        ("ps -e -o pid,,unit", "improper format list"),
        ("ps -e -k pid -o pid=", "unsupported SysV option"),
        ("ps --sort=pid -e -o pid=", "unknown gnu long option"),
        ("ps aux", "unsupported option (BSD syntax)"),
    ],
)
def test_anything_else_is_a_procps_usage_error(
    sim_fleet: FleetHandle, command: str, error: str
) -> None:
    result = ssh(sim_fleet, "gpu-01", command)
    assert (result.stdout, result.exit_status) == ("", 1)
    assert result.stderr == f"error: {error}\n{USAGE_TAIL}"
