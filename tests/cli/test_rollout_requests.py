"""Rollouts through cpctl on rows the factories make (no host is contacted): requesting one with
every kind of selection and shaping, reading it as a table and as the API's JSON, rejecting and
aborting it (and what watching it then exits with), and the server's refusals, each with its
exit code and its words."""

from __future__ import annotations

import re

import pytest
import requests

from controlplane.accounts.models import HostGroup
from controlplane.cli.exits import ExitCode
from deployments.models import Rollout
from deployments.rollouts import requests as rollout_requests
from deployments.rollouts.choices import RolloutHostStatus, RolloutStatus
from tests import factories as f

SWAP = "model_swap to moonshotai/Kimi-K2.5 (INT4)"


@pytest.fixture
def catalog(db):
    return f.make_catalog()


@pytest.fixture
def prod(catalog):
    """Host group prod: gpu-01 and gpu-02, serving Kimi-K2.5 NVFP4, each with a fresh snapshot;
    gpu-03 outside it."""
    group = HostGroup.objects.create(name="prod")
    for i in (1, 2, 3):
        host = f.make_host(f"gpu-0{i}", port=1)
        f.make_deployment(host, catalog["NVFP4"])
        f.make_snapshot(host, age=1)
        if i < 3:
            group.hosts.add(host)
    return group


@pytest.fixture
def waiting(prod, operator):
    """A restart over prod's hosts, waiting for approval."""
    return rollout_requests.rollout_create(
        user=operator, kind="restart", reason="pick up the patched kernel", host_group=prod,
        wave_size=1, max_down=1,
    )  # fmt: skip


def test_a_rollout_requested_with_a_group_shaping_from_a_file_and_read_back(
    cpctl_as, operator, viewer, prod, tmp_path
):
    env_file = tmp_path / "rollout.env"
    # What must not be on the command line stays in the file; its lines are read by cpctl.
    env_file.write_text("# the engine's own\nVLLM_LOGGING_LEVEL=DEBUG\n\nOMP_NUM_THREADS=8\n")
    ran = cpctl_as(operator)(
        "rollouts", "create", "model_swap", "--host-group", "prod",
        "--model", "moonshotai/Kimi-K2.5:INT4", "--max-model-len", "65536",
        "--extra-arg=--enable-prefix-caching", "--env-file", str(env_file),
        "--wave-size", "50%", "--max-down", "2", "--benchmark-margin", "15",
        "--progress-deadline", "900", "--acknowledge-busy",
        "--reason", "INT4 serves more tokens per second",
    )  # fmt: skip
    assert ran.code == 0, ran
    rollout = Rollout.objects.get()
    assert ran.out.splitlines() == [
        f"rollout #{rollout.pk} model_swap to moonshotai/Kimi-K2.5 (INT4): waiting for a second "
        "person's approval",
        "  the canary: gpu-01",
        "  wave 2: gpu-02",
    ]
    assert rollout.host_group_name == "prod" and rollout.status == RolloutStatus.PENDING_APPROVAL
    assert rollout.model.variant == "INT4" and rollout.max_model_len == 65536
    assert rollout.extra_args == ["--enable-prefix-caching"]
    assert rollout.environment == {"VLLM_LOGGING_LEVEL": "DEBUG", "OMP_NUM_THREADS": "8"}
    assert (rollout.wave_size, rollout.wave_unit, rollout.max_down) == (50, "percent", 2)
    assert (rollout.benchmark_margin_pct, rollout.progress_deadline_seconds) == (15, 900)
    assert rollout.acknowledge_busy is True

    cpctl = cpctl_as(viewer)
    ran = cpctl("rollouts", "show", str(rollout.pk))
    assert ran.code == 0, ran
    assert re.search(r"^status\s+pending_approval$", ran.out, re.M), ran
    assert "2, the hosts of group prod when requested" in ran.out
    assert "the canary, then 50 % of the hosts per wave" in ran.out
    # The environment's names, not its values: those are --json's, as the API gives them.
    assert "environment: OMP_NUM_THREADS, VLLM_LOGGING_LEVEL" in ran.out and "DEBUG" not in ran.out
    assert re.search(r"^the canary\s+gpu-01\s+vllm-kimi-k25.service\s+pending\s", ran.out, re.M)
    assert re.search(r"^wave 2\s+gpu-02\s+vllm-kimi-k25.service\s+pending\s", ran.out, re.M)

    # --json is the API's answer, unchanged.
    shown = cpctl("rollouts", "show", str(rollout.pk), "--json").json()
    api = requests.get(
        f"{cpctl.env['CPCTL_URL']}/api/v1/rollouts/{rollout.pk}/",
        headers={"Authorization": f"Bearer {cpctl.env['CPCTL_TOKEN']}"}, timeout=10,
    ).json()  # fmt: skip
    assert shown == api and shown["environment"]["VLLM_LOGGING_LEVEL"] == "DEBUG"
    listed = cpctl("rollouts", "list", "--status", "pending_approval", "--json")
    assert listed.code == 0 and [r["id"] for r in listed.json()] == [rollout.pk], listed
    ran = cpctl("rollouts", "list")
    assert ran.code == 0 and "-/2" in ran.out and "2 (prod)" in ran.out, ran
    assert cpctl("rollouts", "list", "--status", "running", "--json").json() == []


def test_a_rejected_rollout_and_an_aborted_one_watch_to_the_refused_code(
    cpctl_as, operator, approver, waiting, prod
):
    as_approver = cpctl_as(approver)
    ran = as_approver("rollouts", "reject", str(waiting.pk), "--reason", "   ")
    assert ran.code == ExitCode.REFUSED, ran
    assert "reason" in ran.err, ran  # the server's words: a reason must have visible characters

    ran = as_approver("rollouts", "reject", str(waiting.pk), "--reason", "not in the freeze")
    assert ran.code == 0, ran
    assert ran.out == f"rollout #{waiting.pk} restart: rejected: not in the freeze\n", ran
    waiting.refresh_from_db()
    assert waiting.status == RolloutStatus.REJECTED

    ran = as_approver("rollouts", "show", str(waiting.pk))
    assert re.search(
        r"^approval\s+rejected by anna at \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: not in the freeze$",
        ran.out,
        re.M,
    ), ran
    assert re.search(r"^wave 2\s+gpu-02\s+\S+\s+not_reached\s", ran.out, re.M), ran

    ran = as_approver("rollouts", "watch", str(waiting.pk))
    assert ran.code == ExitCode.REFUSED, ran
    lines = ran.out.splitlines()
    assert "  not reached: gpu-01, gpu-02" in lines, ran
    assert lines[-1] == f"rollout #{waiting.pk} restart: rejected: not in the freeze", ran
    watched = as_approver("rollouts", "watch", str(waiting.pk), "--json")
    assert watched.code == ExitCode.REFUSED and watched.json()["status"] == "rejected", watched
    assert "not in the freeze" in watched.err  # what moved goes to stderr under --json

    # Rejected is final: approving it now is a conflict, in the server's words.
    ran = as_approver("rollouts", "approve", str(waiting.pk), "--reason", "changed my mind")
    assert ran.code == ExitCode.REFUSED and "[conflict]" in ran.err, ran

    # The same restart again, aborted by its requester before anyone decided.
    again = rollout_requests.rollout_create(
        user=operator, kind="restart", reason="pick up the patched kernel", host_group=prod,
        wave_size=1, max_down=1,
    )  # fmt: skip
    as_operator = cpctl_as(operator)
    ran = as_operator("rollouts", "abort", str(again.pk), "--reason", "the kernel was pulled")
    assert ran.code == 0 and ": aborted: the kernel was pulled" in ran.out, ran
    ran = as_operator("rollouts", "watch", str(again.pk), "--timeout", "30")
    assert ran.code == ExitCode.REFUSED, ran


def test_bad_input_is_the_refused_code_with_the_servers_words(cpctl_as, operator, prod, tmp_path):
    cpctl = cpctl_as(operator)

    def create(*args: str):
        return cpctl(
            "rollouts", "create", "restart", *args, "--reason", "pick up the patched kernel"
        )

    ran = create("--host-group", "staging")
    assert ran.code == ExitCode.REFUSED, ran
    assert "host_group: Object with name=staging does not exist." in ran.err, ran
    ran = create("--host-group", "staging", "--json")
    assert ran.code == ExitCode.REFUSED, ran
    assert ran.json() == {"host_group": ["Object with name=staging does not exist."]}

    listed = tmp_path / "hosts.txt"
    listed.write_text("gpu-01\n# gpu-02 is being reseated\ngpu-09  # a typo\n")
    ran = create("--hosts-file", str(listed))
    assert ran.code == ExitCode.REFUSED and "No such host: gpu-09." in ran.err, ran
    ran = create("--host-group", "prod", "--wave-size", "0")
    assert ran.code == ExitCode.REFUSED, ran
    assert "wave_size: Ensure this value is greater than or equal to 1." in ran.err, ran
    ran = create("--host-group", "prod", "--wave-size", "150%")
    assert ran.code == ExitCode.REFUSED, ran
    assert "a wave holds at most 100 % of the hosts [invalid]" in ran.err, ran
    ran = create("--host-group", "prod", "--max-down", "0")
    assert ran.code == ExitCode.REFUSED and "max_down" in ran.err, ran
    # A restart carries no model: the kind's own rule, said by the server.
    ran = create("--host-group", "prod", "--tensor-parallel-size", "4")
    assert ran.code == ExitCode.REFUSED and "reshapes nothing" in ran.err, ran
    ran = cpctl("rollouts", "create", "stop", "--host-group", "prod", "--reason", "switch them off")
    assert ran.code == ExitCode.REFUSED and "kind" in ran.err, ran

    # What the command line itself gets wrong is a usage error, before any request.
    assert create().code == ExitCode.USAGE
    assert create("--host", "gpu-01", "--host-group", "prod").code == ExitCode.USAGE
    ran = create("--host-group", "prod", "--wave-size", "half")
    assert ran.code == ExitCode.USAGE and "--wave-size" in ran.err, ran
    assert not Rollout.objects.exists()


def test_who_may_and_what_is_not_there(cpctl_as, operator, viewer, waiting):
    cpctl = cpctl_as(viewer)
    ran = cpctl("rollouts", "show", "999999")
    assert ran.code == ExitCode.NOT_FOUND and "No such rollout." in ran.err, ran
    ran = cpctl("rollouts", "list", "--status", "done")
    assert ran.code == ExitCode.REFUSED and "status" in ran.err, ran
    # A viewer reads, and may not request or decide: the role, in the server's words.
    ran = cpctl("rollouts", "create", "restart", "--host-group", "prod", "--reason", "mine")
    assert ran.code == ExitCode.AUTH and "operator role" in ran.err, ran
    ran = cpctl("rollouts", "approve", str(waiting.pk), "--reason", "fine by me")
    assert ran.code == ExitCode.AUTH, ran
    ran = cpctl("rollouts", "pause", str(waiting.pk))
    assert ran.code == ExitCode.AUTH, ran
    # Pausing one that is not running: the server's conflict.
    ran = cpctl_as(operator)("rollouts", "pause", str(waiting.pk))
    assert ran.code == ExitCode.REFUSED and "[conflict]" in ran.err, ran
    # Watching one nobody has decided on yet: it goes on, and --timeout says so.
    ran = cpctl("rollouts", "watch", str(waiting.pk), "--timeout", "0.5", "--interval", "0.2")
    assert ran.code == ExitCode.UNFINISHED, ran
    assert "is still pending_approval after 0.5 s" in ran.out, ran


@pytest.mark.urls("tests.cli.urls_without_rollouts")
def test_a_server_that_predates_rollouts_says_so(cpctl_as, viewer):
    cpctl = cpctl_as(viewer)
    assert cpctl("hosts", "list").code == 0  # the same server answers the rest of the API
    ran = cpctl("rollouts", "list")
    assert ran.code == ExitCode.NOT_FOUND, ran
    assert "this server has no rollouts" in ran.err, ran
    ran = cpctl("rollouts", "list", "--json")
    assert ran.json() == {"detail": "no such endpoint", "code": "no_endpoint"}, ran
    ran = cpctl("rollouts", "watch", "1")
    assert ran.code == ExitCode.NOT_FOUND and "this server has no rollouts" in ran.err, ran


def test_an_aborted_rollout_is_watched_until_the_change_under_way_ends(
    cpctl_as, operator, approver, prod, catalog, private_queue
):
    """Aborting starts no other host, and a change already running finishes by itself: watch
    follows it to its end before it says how the rollout ended."""
    from deployments.rollouts import decisions, orchestrator
    from tests.deployments.rollouts.conftest import end_change, fresh, take_turns

    hosts = list(prod.hosts.order_by("name"))
    for host in hosts:
        fresh(host)  # a snapshot and the verdict decided on it, as a probe leaves them
    rollout = rollout_requests.rollout_create(
        user=operator, kind="model_swap", model=catalog["INT4"], hosts=hosts,
        reason="INT4 serves more tokens per second", wave_size=1, max_down=1,
    )  # fmt: skip
    decisions.rollout_approve(rollout=rollout, approver=approver, reason="the canary will tell")
    [canary] = take_turns(rollout)  # a worker's look: the canary's change is requested
    assert canary.status == RolloutHostStatus.RUNNING and canary.change is not None

    cpctl = cpctl_as(operator)
    ran = cpctl("rollouts", "abort", str(rollout.pk), "--reason", "the build was pulled")
    assert ran.code == 0, ran
    ran = cpctl("rollouts", "watch", str(rollout.pk), "--interval", "0.2", "--timeout", "1")
    assert ran.code == ExitCode.UNFINISHED, ran
    assert (
        f"rollout #{rollout.pk}: aborted: the build was pulled; the changes under way end by "
        f"themselves: gpu-01: running (change #{canary.change_id})"
    ) in ran.out, ran

    end_change(canary.change)
    orchestrator.rollout_sync(rollout_id=rollout.pk)
    ran = cpctl("rollouts", "watch", str(rollout.pk))
    assert ran.code == ExitCode.REFUSED, ran
    lines = ran.out.splitlines()
    assert f"  gpu-01: succeeded (change #{canary.change_id})" in lines, ran
    assert "  not reached: gpu-02" in lines, ran  # wave 2 never started
    assert lines[-1] == f"rollout #{rollout.pk} {SWAP}: aborted: the build was pulled", ran


def test_an_approval_says_which_hosts_it_left_out_and_why(
    cpctl_as, approver, waiting, private_queue
):
    """The approval binds what each host serves now; a host whose newest snapshot is not ok is
    skipped, and cpctl says so where the approver looks: the answer, and the table."""
    from hosts.models import Host

    f.make_snapshot(Host.objects.get(name="gpu-02"), status="unreachable", age=0.5)
    cpctl = cpctl_as(approver)
    ran = cpctl("rollouts", "approve", str(waiting.pk), "--reason", "gpu-01 first")
    assert ran.code == 0, ran
    first, skipped = ran.out.splitlines()
    assert first == f"rollout #{waiting.pk} restart: approved", ran
    assert skipped.startswith("  gpu-02: skipped: not reviewable when the rollout was approved"), (
        ran
    )
    ran = cpctl("rollouts", "show", str(waiting.pk))
    assert re.search(
        r"^wave 2\s+gpu-02\s+\S+\s+skipped\s+-\s+-\s+-\s+not reviewable when", ran.out, re.M
    ), ran
    assert re.search(
        r"^approval\s+approved by anna at .*Z: gpu-01 first \(to start by ", ran.out, re.M
    )
