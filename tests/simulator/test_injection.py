"""Command lines that try to smuggle in a second command arrive inert and are logged verbatim."""

from __future__ import annotations

import shlex

import pytest

from simulator import catalog
from tests.fleet import FleetHandle, ssh

UNIT = catalog.DEFAULT_UNIT
HOSTILE = [
    "x;reboot",
    "x && reboot",
    "$(reboot)",
    "`reboot`",
    "x|reboot",
    "x\nreboot",
    "'; reboot #",
]


def _untouched(fleet: FleetHandle, pid: int) -> None:
    unit = fleet.state("gpu-01")["units"][UNIT]
    assert (unit["active_state"], unit["main_pid"]) == ("active", pid)


@pytest.mark.parametrize("arg", HOSTILE)
def test_quoted_unit_names_are_one_literal_argument(sim_fleet: FleetHandle, arg: str) -> None:
    pid = sim_fleet.state("gpu-01")["units"][UNIT]["main_pid"]
    line = f"sudo -n systemctl restart --no-block {shlex.quote(arg)} 2>&1"
    result = ssh(sim_fleet, "gpu-01", line)
    assert sim_fleet.command_log("gpu-01") == [line]
    out = result.stdout
    assert result.exit_status == 5
    assert out.count("Failed to restart ") == 1, out
    assert "not found" in out and "command not found" not in out
    _untouched(sim_fleet, pid)


def test_systemctl_escapes_the_name_like_systemd(sim_fleet: FleetHandle) -> None:
    result = ssh(sim_fleet, "gpu-01", "systemctl show 'x;reboot' --no-pager -p Id,LoadState")
    assert result.stdout == "Id=x\\x3breboot.service\nLoadState=not-found\n"
    assert result.stderr == (
        'Invalid unit name "x;reboot" escaped as "x\\x3breboot" '
        "(maybe you should use systemd-escape?).\n"
    )


def test_other_tools_take_hostile_arguments_literally(sim_fleet: FleetHandle) -> None:
    result = ssh(sim_fleet, "gpu-01", "sha256sum -- '/etc/systemd/system/x;reboot'")
    assert result.exit_status == 1
    assert result.stderr == "sha256sum: /etc/systemd/system/x;reboot: No such file or directory\n"
    result = ssh(sim_fleet, "gpu-01", "journalctl -u 'x;reboot' -n 5 --no-pager -o cat")
    assert result.stdout == "-- No entries --\n"
    result = ssh(sim_fleet, "gpu-01", "echo '$(reboot)' \"a;b\" 'c`d`'")
    assert result.stdout == "$(reboot) a;b c`d`\n"


@pytest.mark.parametrize(
    "line",
    [
        "echo $(reboot)",
        'echo "$(reboot)"',
        "echo `reboot`",
        "hostname | reboot",
        "reboot &",
        "(reboot)",
        "cat <<EOF",
    ],
)
def test_unquoted_evaluation_is_refused_not_run(sim_fleet: FleetHandle, line: str) -> None:
    pid = sim_fleet.state("gpu-01")["units"][UNIT]["main_pid"]
    result = ssh(sim_fleet, "gpu-01", f"sudo -n systemctl stop {UNIT}; {line}")
    assert result.exit_status == 2
    assert result.stdout == ""
    assert "not supported by this simulated host" in result.stderr
    assert sim_fleet.command_log("gpu-01") == [f"sudo -n systemctl stop {UNIT}; {line}"]
    _untouched(sim_fleet, pid)  # bash parses the whole line first: the stop never ran either


def test_earlier_lines_run_before_a_refused_one(sim_fleet: FleetHandle) -> None:
    result = ssh(sim_fleet, "gpu-01", "echo first\necho $(reboot)\necho never")
    assert result.stdout == "first\n"
    assert result.stderr.startswith("bash: line 2: command substitution is not supported")


def test_unknown_commands_answer_like_bash(sim_fleet: FleetHandle) -> None:
    result = ssh(sim_fleet, "gpu-01", "echo ok\nreboot now")
    assert (result.stdout, result.stderr, result.exit_status) == (
        "ok\n",
        "bash: line 2: reboot: command not found\n",
        127,
    )
    result = ssh(sim_fleet, "gpu-01", "echo 'unterminated")
    assert result.exit_status == 2
    assert result.stderr == "bash: -c: line 1: unexpected EOF while looking for matching `''\n"
