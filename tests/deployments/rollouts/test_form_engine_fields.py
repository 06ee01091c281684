"""The rollout form's engine arguments and environment: what the API already takes, checked as
the change form checks them (deployments.unit_files.engine_flags: reserved flags in any
spelling, secrets, the safe alphabet; the environment's names and values), so the page can do
what the API can and refuses what a change's page refuses."""

from __future__ import annotations

import pytest
from django.urls import reverse

from deployments.models import Rollout

from .conftest import approved, take_turns

pytestmark = pytest.mark.django_db
SWAP = "model_swap"


def post(client, fleet, catalog, **fields):
    data = {
        "kind": SWAP, "model": catalog["INT4"].pk, "hosts": [d.host.pk for d in fleet[:2]],
        "wave_size": 1, "wave_unit": "hosts", "max_down": 1, "benchmark_margin_pct": 10,
        "progress_deadline_minutes": 30, "reason": "INT4 with a bigger batch", **fields,
    }  # fmt: skip
    return client.post(reverse("rollouts:create"), data)


def field_errors(response, name: str) -> list[str]:
    return [str(e) for e in response.context["form"].errors.get(name, [])]


def test_the_form_offers_engine_arguments_and_environment(client, operator, fleet) -> None:
    client.force_login(operator)
    page = client.get(reverse("rollouts:create")).content.decode()
    assert 'name="extra_args"' in page and 'name="environment"' in page


def test_a_swap_with_engine_arguments_and_environment_reaches_each_hosts_change(
    client, operator, approver, fleet, catalog
) -> None:
    client.force_login(operator)
    response = post(
        client, fleet, catalog,
        extra_args="--max-num-seqs 64 --gpu-memory-utilization=0.95",
        environment="NCCL_DEBUG=WARN\n\nVLLM_LOGGING_LEVEL=INFO\n",
    )  # fmt: skip
    assert response.status_code == 302, response.content.decode()
    rollout = Rollout.objects.get()
    assert rollout.extra_args == ["--max-num-seqs", "64", "--gpu-memory-utilization=0.95"]
    assert rollout.environment == {"NCCL_DEBUG": "WARN", "VLLM_LOGGING_LEVEL": "INFO"}
    page = client.get(response["Location"]).content.decode()
    assert "--max-num-seqs 64" in page and "NCCL_DEBUG=WARN" in page
    [canary] = take_turns(approved(rollout, approver))
    revision = canary.change.target_revision
    # in the engine's canonical spelling, as any change writes them
    assert revision.extra_args == ["--max-num-seqs=64", "--gpu-memory-utilization=0.95"]
    assert revision.environment == rollout.environment


@pytest.mark.parametrize(
    "extra_args",
    [
        "--tensor-parallel-size=2",  # decided by the rollout's own field
        "--port 9000",
        "--served-model-n other",  # an abbreviation the engine's parser accepts
        "--x=$(reboot)",
    ],
)
def test_reserved_or_hostile_engine_arguments_are_refused_by_the_form(
    client, operator, fleet, catalog, extra_args
) -> None:
    client.force_login(operator)
    response = post(client, fleet, catalog, extra_args=extra_args)
    assert response.status_code == 400
    assert field_errors(response, "extra_args"), response.content.decode()
    assert not Rollout.objects.exists()


def test_a_secret_in_the_engine_arguments_is_not_shown_back(
    client, operator, fleet, catalog
) -> None:
    client.force_login(operator)
    response = post(client, fleet, catalog, extra_args="--api-key=hunter2-very-secret")
    assert response.status_code == 400
    assert "would put a secret in the unit file" in " ".join(field_errors(response, "extra_args"))
    assert "hunter2-very-secret" not in response.content.decode()
    assert not Rollout.objects.exists()


@pytest.mark.parametrize(
    ("environment", "said"),
    [
        ("NCCL_DEBUG", "Line 1: write NAME=value."),
        ("not a name=1", "is not a variable name"),
        ("HF_TOKEN=abc", "looks like a secret"),
        ("NCCL_DEBUG=$(reboot)", "may hold letters, digits"),
    ],
)
def test_a_bad_environment_is_refused_by_the_form(
    client, operator, fleet, catalog, environment, said
) -> None:
    client.force_login(operator)
    response = post(client, fleet, catalog, environment=environment)
    assert response.status_code == 400
    assert said in " ".join(field_errors(response, "environment"))
    assert not Rollout.objects.exists()


def test_a_kind_that_reshapes_nothing_is_refused_beside_the_field(
    client, operator, fleet, catalog
) -> None:
    client.force_login(operator)
    response = post(client, fleet, catalog, kind="restart", model="", extra_args="--max-num-seqs 8")
    assert response.status_code == 400
    assert "a restart reshapes nothing" in " ".join(field_errors(response, "extra_args"))
    assert not Rollout.objects.exists()
