"""A deployment's drain grace as its unit carries it: vLLM's --shutdown-timeout (reserved: only
the deployment's field sets it) and systemd's TimeoutStopSec= longer than it, SGLang's stop
timeout alone, and why changing it needs no second person (deployments.policy)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from deployments import policy, revisions, services
from deployments.choices import ChangeStatus
from deployments.models import Deployment
from deployments.unit_files import engine_flags, serving_plan, units
from hosts.commands import UnsafeCommand
from tests import factories as f

MARGIN = units.STOP_MARGIN_SECONDS


def spec(engine: str = "vllm", grace: int = 0) -> units.UnitSpec:
    return units.UnitSpec(
        unit="vllm-kimi-k25.service", engine=engine, engine_binary="/opt/vllm/.venv/bin/vllm",
        model_path="/models/moonshotai/Kimi-K2.5-NVFP4", served_name="kimi-k2.5",
        tensor_parallel_size=8, max_model_len=262144, port=8000, bind_address="127.0.0.1",
        extra_args=(), drain_grace=grace,
    )  # fmt: skip


def test_a_vllm_unit_with_a_grace_drains_on_stop_and_systemd_waits_longer() -> None:
    text = units.render_unit(spec(grace=45))
    assert "--shutdown-timeout 45" in units.exec_start_of(text)
    assert "TimeoutStopSec=75\n" in text  # 30 s for vLLM's teardown after the drain
    stop = next(d for d in units.directives(text) if d.key == "TimeoutStopSec")
    assert int(stop.value) > 45
    assert serving_plan.plan_from_unit_text(text).shutdown_timeout == 45


def test_sglang_drains_on_sigterm_by_itself_and_gets_the_stop_timeout_only() -> None:
    text = units.render_unit(spec(engine="sglang", grace=45))
    assert "--shutdown-timeout" not in text
    assert f"TimeoutStopSec={45 + MARGIN}\n" in text


def test_without_a_grace_the_unit_says_nothing_about_stopping() -> None:
    text = units.render_unit(spec())
    assert "--shutdown-timeout" not in text and "TimeoutStopSec" not in text


BASE = (
    "[Service]\nType=simple\n{before}ExecStart=/opt/vllm/.venv/bin/vllm serve /m --port 8000\n"
    "{after}Restart=always\n"
)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        # none yet: written before the engine's command line
        ("", "", f"TimeoutStopSec={60 + MARGIN}\nExecStart="),
        # the operator's own: rewritten in place
        ("TimeoutStopSec=20\n", "", f"Type=simple\nTimeoutStopSec={60 + MARGIN}\nExecStart="),
        # a TimeoutSec= after it would win: written after that one
        (
            "TimeoutStopSec=20\n",
            "TimeoutSec=10\n",
            f"TimeoutSec=10\nTimeoutStopSec={60 + MARGIN}\n",
        ),
    ],
)
def test_a_rewrite_sets_the_stop_timeout_where_systemd_reads_it_last(
    before: str, after: str, expected: str
) -> None:
    text = BASE.format(before=before, after=after)
    exec_start = units.exec_start(spec(grace=60))
    rewritten = units.rewrite_unit(
        text, exec_start_line=exec_start, old_env={}, new_env={}, drain_grace=60
    )
    assert expected in rewritten
    timeouts = [
        d.describe().split("] ")[1]
        for d in units.directives(rewritten)
        if d.key in ("TimeoutStopSec", "TimeoutSec")
    ]
    assert timeouts[-1] == f"TimeoutStopSec={60 + MARGIN}"  # systemd takes the last one
    assert "Restart=always\n" in rewritten


def test_a_rewrite_without_a_grace_keeps_the_operators_stop_timeout() -> None:
    text = BASE.format(before="TimeoutStopSec=20\n", after="")
    rewritten = units.rewrite_unit(
        text, exec_start_line=units.exec_start(spec()), old_env={}, new_env={}
    )
    assert "TimeoutStopSec=20\n" in rewritten and "--shutdown-timeout" not in rewritten


@pytest.mark.parametrize(
    "extra_args",
    [
        ["--shutdown-timeout=5"],
        ["--shutdown-timeout", "5"],
        ["--shutdown_timeout=5"],
        ["--shutdown=5"],
        ["--shut", "5"],
        ["--shutdown-t=5"],
    ],
)
def test_extra_arguments_cannot_set_the_grace_in_any_spelling(extra_args: list[str]) -> None:
    with pytest.raises(engine_flags.EngineArgRefused, match="drain_grace_seconds field"):
        engine_flags.check_extra_args(extra_args)


def test_a_grace_that_bypassed_validation_is_never_written() -> None:
    with pytest.raises(UnsafeCommand):
        units.render_unit(spec(grace=-1))
    with pytest.raises(UnsafeCommand):
        units.exec_start(spec(grace=units.DRAIN_GRACE_MAX_SECONDS + 1))


@pytest.mark.django_db
def test_the_deployment_field_is_bounded(deployment) -> None:
    deployment.drain_grace_seconds = units.DRAIN_GRACE_MAX_SECONDS + 1
    with pytest.raises(ValidationError) as caught:
        deployment.full_clean()
    assert "drain_grace_seconds" in caught.value.message_dict


@pytest.mark.django_db
def test_changing_the_grace_needs_no_second_person_but_is_shown(operator, deployment, host):
    """Harmless, policy says: it decides how long a stopping server lets requests finish, and
    nothing about what serves or who can reach it (TimeoutStopSec= is a harmless directive)."""
    revisions.deployment_current_revision(deployment)  # written before the grace was set
    Deployment.objects.filter(pk=deployment.pk).update(drain_grace_seconds=60)
    deployment.refresh_from_db()
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="redeploy", snapshot=f.make_snapshot(host),
        reason="drain on stop",
    )  # fmt: skip
    assert change.status == ChangeStatus.QUEUED and not change.needs_approval
    revision = change.target_revision
    assert revision.drain_grace_seconds == 60
    assert "--shutdown-timeout 60" in revision.unit_text
    changes = serving_plan.unit_differences(change.from_revision.unit_text, revision.unit_text)
    assert [(c.what, c.before, c.after, c.why) for c in changes] == [
        ("drain grace (--shutdown-timeout)", None, 60, "")
    ]
    assert policy.approval_reasons(target=_target(change)) == []
    assert "drain grace" in (policy.__doc__ or "")  # and says why, where the rule lives


def _target(change):
    from deployments.revisions import ChangeTarget

    revision = change.target_revision
    return ChangeTarget(
        change.kind, change.from_revision, revision.model, revision.unit_text, revision=revision
    )


@pytest.mark.django_db
def test_the_job_waits_for_a_draining_stop_as_long_as_systemd_does(operator, deployment, host):
    from deployments.execution.job import Job
    from deployments.execution.verification import STOP_TIMEOUT_SECONDS, stop_seconds

    change = services.change_request_create(
        user=operator, deployment=deployment, kind="restart", snapshot=f.make_snapshot(host),
        reason="patch",
    )  # fmt: skip
    assert stop_seconds(Job(change)) == 0  # written without a grace: systemd's own default
    DeploymentRevision = type(change.from_revision)
    DeploymentRevision.objects.filter(pk=change.from_revision_id).update(drain_grace_seconds=600)
    change.refresh_from_db()
    assert stop_seconds(Job(change)) == 600 + MARGIN > STOP_TIMEOUT_SECONDS
