"""sudo on a simulated host: with a file in /etc/sudoers.d, only what it allows runs, matched and
refused the way sudo does it; without one, everything runs as before."""

from __future__ import annotations

import pytest

from simulator import catalog
from simulator.shell.sudoers import SudoersError, parse, resolved
from tests.fleet import FleetHandle, ssh

UNIT = catalog.DEFAULT_UNIT
POLICY = "/etc/sudoers.d/controlplane"
ENTRY = """\
# /etc/sudoers.d/controlplane: a comment, then one user specification over three lines
deploy ALL=(root) NOPASSWD: \\
    /usr/bin/systemctl restart --no-block vllm-*.service, \\
    /usr/bin/systemctl daemon-reload, \\
    /usr/bin/cat -- /etc/vllm/kimi-k25.env, \\
    /usr/bin/tee -- /etc/systemd/system/vllm-*.service, \\
    /opt/vllm/.venv/bin/python3 -m pip install --root-user-action\\=ignore vllm\\=\\=0.11.2
"""
PASSWORD = "sudo: a password is required\n"


def with_entry(fleet: FleetHandle, entry: str = ENTRY, path: str = POLICY) -> FleetHandle:
    fleet.write_file("gpu-01", path, entry)
    return fleet


def as_deploy(fleet: FleetHandle, command: str) -> tuple[str, str, int]:
    return fleet.run("gpu-01", command, username="deploy")


def test_without_a_sudoers_file_sudo_runs_anything(sim_fleet: FleetHandle) -> None:
    assert as_deploy(sim_fleet, "sudo -n systemctl daemon-reload") == ("", "", 0)
    with_entry(sim_fleet, path="/etc/sudoers.d/controlplane.dpkg-old")  # sudo skips such names
    assert as_deploy(sim_fleet, "sudo -n systemctl stop --no-block " + UNIT)[2] == 0


def test_what_the_entry_allows_runs_over_ssh(sim_fleet: FleetHandle) -> None:
    with_entry(sim_fleet)
    result = ssh(
        sim_fleet, "gpu-01", f"sudo -n systemctl restart --no-block {UNIT}", username="deploy"
    )
    assert (result.exit_status, result.stderr) == (0, "")
    assert as_deploy(sim_fleet, "sudo -n /bin/systemctl daemon-reload")[2] == 0  # /bin is /usr/bin


def test_anything_else_asks_for_a_password_that_sudo_n_cannot_give(sim_fleet: FleetHandle) -> None:
    with_entry(sim_fleet)
    for command in (
        "sudo -n systemctl restart sshd.service",
        "sudo -n systemctl stop --no-block " + UNIT,
        "sudo -n tee -- /etc/passwd",
        "sudo -n cat /etc/vllm/kimi-k25.env",  # the entry has `--`: arguments match exactly
        "sudo -n cat -- /etc/vllm/kimi-k25.env /etc/shadow",
        "sudo -n systemctl daemon-reload --now",
        "sudo -n /usr/sbin/systemctl daemon-reload",  # another path is another program
        "sudo -n /opt/vllm/.venv/bin/python3 -m pip install vllm==0.11.2",
    ):
        assert as_deploy(sim_fleet, command) == ("", PASSWORD, 1), command
    _, err, status = as_deploy(sim_fleet, "sudo systemctl restart sshd.service")
    assert status == 1 and err.startswith("sudo: a terminal is required to read the password")
    assert sim_fleet.state("gpu-01")["units"][UNIT]["active_state"] == "active"


def test_root_is_held_to_the_entry_too_and_hears_why(sim_fleet: FleetHandle) -> None:
    with_entry(sim_fleet, ENTRY.replace("deploy ALL", "root ALL"))
    out, err, status = sim_fleet.run("gpu-01", "sudo -n tee -- /etc/passwd", stdin="x\n")
    assert (out, status) == ("", 1)
    assert err == (
        "Sorry, user root is not allowed to execute '/usr/bin/tee -- /etc/passwd' as root on "
        "gpu-01.\n"
    )
    assert sim_fleet.run("gpu-01", "sudo -n systemctl daemon-reload")[2] == 0
    with_entry(sim_fleet)  # an entry for someone else only
    assert sim_fleet.run("gpu-01", "sudo -n systemctl daemon-reload")[1] == (
        "root is not in the sudoers file.\n"
    )
    assert sim_fleet.run("gpu-01", "systemctl daemon-reload")[2] == 0  # no sudo, no sudoers


def test_a_star_matches_spaces_as_sudos_does(sim_fleet: FleetHandle) -> None:
    """Why the README lists environment files one by one: `vllm-*.service` also covers
    `vllm-a.service sshd.service`, two arguments."""
    with_entry(sim_fleet)
    _, err, _ = as_deploy(sim_fleet, f"sudo -n systemctl restart --no-block {UNIT} sshd.service")
    assert PASSWORD not in err


def test_a_broken_file_refuses_everything(sim_fleet: FleetHandle) -> None:
    with_entry(sim_fleet, "deploy ALL=(root) NOPASSWD: /usr/bin/cat --, : oops\n")
    _, err, status = as_deploy(sim_fleet, "sudo -n systemctl daemon-reload")
    assert status == 1
    assert f"sudo: parse error in {POLICY} near line 1\n" in err


def test_the_grammar_the_entries_use() -> None:
    rules = parse(
        "Defaults env_reset\n"
        'ops, deploy gpu-01 = (root) /usr/bin/id, NOPASSWD: /usr/bin/date "", '
        "/usr/bin/journalctl ^-u vllm-[a-z0-9-]+\\.service -n [0-9]+$  # trailing comment\n"
        "deploy ALL = (ALL) NOPASSWD: ALL, !/usr/bin/tee\n"
    )
    assert [(r.users, r.hosts, r.nopasswd, r.negated) for r in rules] == [
        (("ops", "deploy"), ("gpu-01",), False, False),
        (("ops", "deploy"), ("gpu-01",), True, False),
        (("ops", "deploy"), ("gpu-01",), True, False),
        (("deploy",), ("ALL",), True, False),
        (("deploy",), ("ALL",), True, True),
    ]
    _id, date, journal, _all, tee = rules
    assert date.matches("/usr/bin/date", "") and not date.matches("/usr/bin/date", "-s 1")
    assert journal.matches("/usr/bin/journalctl", "-u vllm-a.service -n 50")
    assert not journal.matches("/usr/bin/journalctl", "-u vllm-a.service -n 50 -f")
    assert tee.matches(resolved("tee"), "-- /etc/passwd")
    assert resolved("/sbin/reboot") == "/usr/sbin/reboot"
    with pytest.raises(SudoersError):
        parse("Cmnd_Alias VLLM = /usr/bin/systemctl\n")
