"""The sudoers entry (hosts.sudoers) against what the product sends under `sudo -n`.

Registered test fleets carry the entry in /etc/sudoers.d/controlplane (tests.fleet) and the
simulated hosts refuse, as sudo does, whatever it does not allow. Here one host goes through
everything that needs root (a probe reading a root-only environment file, with the integrity
check; restart, stop, start, model swap, rollback, engine repair; the journal), every command
sent under sudo is checked against the entry, and every line of the entry must have been used:
a command outside it fails the flow, and a line nothing uses is privilege nobody needs.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from deployments import services
from deployments.choices import ChangeStatus
from deployments.execution import runner
from deployments.models import Deployment, ModelArtifact
from hosts import services as host_services
from hosts import sudoers
from hosts.models import Host, StateSnapshot
from simulator import catalog
from simulator.shell.sudoers import Rule, parse, resolved
from simulator.shell.syntax import parse_lines, parse_list
from simulator.shell.tokenizer import tokenize
from tests.fleet import RegisteredFleet, register, ssh

pytestmark = pytest.mark.integration
UNIT = catalog.DEFAULT_UNIT
REFUSALS = ("a password is required", "is not allowed to execute", "not in the sudoers file")


def sudo_commands(log: list[str]) -> list[list[str]]:
    """Every `sudo ...` the host ran, as the argv sudo was given (read as the host reads it)."""
    found = []
    for script in log:
        tokens, _error = tokenize(script)
        for line in parse_lines(tokens):
            for _connector, command in parse_list(line):
                argv = [w.expand({"?": "0"}) for w in command.words]
                if argv[:1] == ["sudo"]:
                    found.append(argv)
    return found


def allowing(rules: list[Rule], argv: list[str]) -> list[Rule]:
    """The rules that allow `sudo -n <argv>`."""
    assert argv[:2] == ["sudo", "-n"], argv
    path, args = resolved(argv[2]), " ".join(argv[3:])
    return [r for r in rules if r.matches(path, args)]


def probe(host: Host, *, integrity: bool = False) -> StateSnapshot:
    host = Host.objects.select_related("credential").get(pk=host.pk)
    snapshot = host_services.host_probe(host=host, trigger="manual", integrity=integrity)
    assert snapshot.status == "ok", snapshot.error
    return snapshot


def change(fleet: RegisteredFleet, kind: str, operator: Any, approver: Any, **kw: Any) -> None:
    """Request, approve where needed, and run one change in this process; it must succeed."""
    host = fleet.host("gpu-01")
    deployment = Deployment.objects.get(host=host)
    request = services.change_request_create(
        user=operator, deployment=deployment, kind=kind, snapshot=probe(host, integrity=True),
        reason=f"exercise {kind}", **kw,
    )  # fmt: skip
    if request.status == ChangeStatus.PENDING_APPROVAL:
        services.change_request_approve(
            change=request, approver=approver, snapshot=probe(host), reason="fine"
        )
    runner.change_execute(change_id=request.pk)
    request.refresh_from_db()
    assert request.status == ChangeStatus.SUCCEEDED, (kind, request.status_reason)
    for step in request.steps.all():
        assert not any(r in step.output for r in REFUSALS), (kind, step.name, step.output)


@pytest.fixture
def fleet(db: None, make_fleet: Any, settings: Any) -> RegisteredFleet:
    """One host with the hand-written unit shape: its model comes from a root-only
    environment file, which the probe reads under sudo."""
    settings.HEALTH_POLL_SECONDS = 0.1
    return register(make_fleet(1, unit_styles={"gpu-01": "envfile"}))


# --- the entry itself ------------------------------------------------------------------------


def test_the_entry_parses_as_one_rule_per_command() -> None:
    rules = parse(sudoers.example_entry())
    assert len(rules) == 11
    xids = next(r for r in rules if r.args is not None and r.args.startswith("-k"))
    assert (xids.program, xids.args) == (
        "/usr/bin/journalctl",
        "-k -b -q --no-pager -o short-iso -n 50 --grep NVRM:.Xid",
    )  # exact: the kernel log's Xid lines of this boot, and nothing else journalctl can do
    assert {(r.users, r.hosts, r.runas, r.nopasswd, r.negated) for r in rules} == {
        (("deploy",), ("ALL",), ("root",), True, False)
    }
    pip = rules[-1]
    assert pip.program == sudoers.EXAMPLE_ENGINE_PYTHON
    assert pip.args is not None and pip.args.endswith(
        " --root-user-action=ignore vllm==0.11.2"
    )  # escaped `\=` in the file, plain `=` once sudo has read it


def test_visudo_accepts_the_entry(tmp_path: Path) -> None:
    visudo = shutil.which("visudo") or shutil.which("visudo", path="/usr/sbin:/sbin")
    assert visudo is not None, "visudo is not installed: `make visudo` installs Debian's sudo"
    exact = sudoers.example_entry().replace(sudoers.UNIT_PATTERN, UNIT)
    for entry in (sudoers.example_entry(), exact):
        path = tmp_path / "controlplane"
        path.write_text(entry)
        result = subprocess.run(
            [visudo, "-c", "-f", str(path)], capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_the_example_is_the_demo_fleets_own() -> None:
    """The README's entry names what the demo fleet's hosts and default deployments have."""
    assert sudoers.EXAMPLE_ENVIRONMENT_FILES == (catalog.ENV_FILE,)
    assert sudoers.EXAMPLE_ENGINE_VERSION == catalog.VLLM_VERSION
    assert Deployment._meta.get_field("engine_python").default == sudoers.EXAMPLE_ENGINE_PYTHON


def test_the_command_prints_the_example_or_a_hosts_entry(fleet: RegisteredFleet) -> None:
    out = io.StringIO()
    call_command("sudoers_entry", stdout=out)
    assert out.getvalue() == sudoers.example_entry()
    out = io.StringIO()
    call_command("sudoers_entry", "--user", "ops", stdout=out)
    assert out.getvalue().splitlines()[1] == "ops ALL=(root) NOPASSWD: \\"

    out, err = io.StringIO(), io.StringIO()
    call_command("sudoers_entry", "--host", "gpu-01", stdout=out, stderr=err)
    assert "never probed" in err.getvalue() and "-m pip" not in out.getvalue()
    probe(fleet.host("gpu-01"), integrity=True)
    out = io.StringIO()
    call_command("sudoers_entry", "--host", "gpu-01", stdout=out)
    # A host's entry names its units exactly, where the example has a pattern.
    exact = sudoers.example_entry(user="root").replace(sudoers.UNIT_PATTERN, UNIT)
    assert out.getvalue() == exact


def test_a_hosts_entry_admits_no_second_unit(fleet: RegisteredFleet) -> None:
    """The example's `vllm-*.service` also matches `vllm-a.service sshd.service` (sudo's `*`
    matches spaces); the entry for a registered host does not."""
    probe(fleet.host("gpu-01"), integrity=True)
    entry, _notes = sudoers.host_entry(host=fleet.host("gpu-01"))
    rules = parse(entry)
    sneaky = ["sudo", "-n", "systemctl", "stop", "--no-block", UNIT, "sshd.service"]
    assert allowing(parse(sudoers.example_entry()), sneaky)
    assert not allowing(rules, sneaky)
    assert allowing(rules, ["sudo", "-n", "systemctl", "stop", "--no-block", UNIT])
    assert not allowing(rules, ["sudo", "-n", "tee", "--", f"/etc/systemd/system/{UNIT}", "/x"])


# --- the entry against the product -----------------------------------------------------------


def test_everything_the_product_runs_under_sudo_is_in_the_entry_and_nothing_more(
    fleet: RegisteredFleet, operator: Any, approver: Any, viewer: Any
) -> None:
    host = fleet.host("gpu-01")
    fleet.clear_command_log("gpu-01")
    snapshot = probe(host, integrity=True)
    state = snapshot.state().deployments[UNIT]
    assert [(f.path, f.missing) for f in state.environment_files] == [(catalog.ENV_FILE, False)]
    assert state.integrity is not None and state.integrity.version == catalog.VLLM_VERSION

    change(fleet, "restart", operator, approver)
    int4 = ModelArtifact.objects.get(path__endswith="K2.5-INT4")
    change(fleet, "model_swap", operator, approver, model=int4)
    change(fleet, "rollback", operator, approver)
    change(fleet, "stop", operator, approver)
    change(fleet, "start", operator, approver)
    fleet.set_patched_engine("gpu-01")
    change(fleet, "engine_repair", operator, approver)
    lines = host_services.host_journal(host=host, unit=UNIT, lines=5, user=viewer)
    assert lines and not any(r in line for line in lines for r in REFUSALS)

    sent = sudo_commands(fleet.command_log("gpu-01"))
    installed = parse(fleet.run("gpu-01", f"cat {sudoers.SUDOERS_PATH}")[0])
    refused = [argv for argv in sent if not allowing(installed, argv)]
    assert refused == []
    # The README's entry (this host's files, the engine from the index) is exactly what ran.
    example = parse(sudoers.example_entry(user="root"))
    unused = [r for r in example if not any(r in allowing(example, argv) for argv in sent)]
    assert unused == []


def test_what_the_entry_leaves_out_the_host_refuses(fleet: RegisteredFleet) -> None:
    for command, shown in (
        ("/usr/bin/systemctl restart sshd.service", "/usr/bin/systemctl restart sshd.service"),
        ("tee -- /etc/passwd", "/usr/bin/tee -- /etc/passwd"),
        ("cat -- /etc/shadow", "/usr/bin/cat -- /etc/shadow"),
    ):
        result = ssh(fleet.fleet, "gpu-01", f"sudo -n {command}")
        assert result.exit_status == 1, command
        assert result.stderr == (
            f"Sorry, user root is not allowed to execute '{shown}' as root on gpu-01.\n"
        )
    # An account of its own, as the README sets up: refused before anything is said.
    fleet.write_file("gpu-01", sudoers.SUDOERS_PATH, sudoers.example_entry())
    result = ssh(fleet.fleet, "gpu-01", "sudo -n tee -- /etc/passwd", username="deploy")
    assert (result.exit_status, result.stderr) == (1, "sudo: a password is required\n")
    result = ssh(
        fleet.fleet, "gpu-01", f"sudo -n systemctl restart --no-block {UNIT}", username="deploy"
    )
    assert (result.exit_status, result.stderr) == (0, "")
