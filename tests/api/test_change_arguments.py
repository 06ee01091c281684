"""Extra engine arguments through the API: values the engine would refuse are a 400 naming the
flag and what the engine accepts, `--flag value` reads as `--flag=value`, and no answer shows a
secret back (deployments.unit_files.engine_flags; the other entry points in
tests/deployments/test_engine_flag_values.py)."""

from __future__ import annotations

import pytest

from deployments.models import ChangeRequest
from tests import factories as f

CHANGES = "/api/v1/changes/"


def redeploy(client, deployment, extra_args):
    body = {
        "deployment_id": deployment.pk,
        "kind": "redeploy",
        "snapshot_id": f.make_snapshot(deployment.host).pk,
        "reason": "tune the engine",
        "extra_args": extra_args,
    }
    return client.post(CHANGES, body, format="json")


@pytest.mark.parametrize(
    ("extra_args", "message"),
    [
        (
            ["--gpu-memory-utilization=7"],
            "--gpu-memory-utilization must be a number between 0 and 1 (got 7)",
        ),
        (
            ["--gpu-memory-utilization", "7"],
            "--gpu-memory-utilization must be a number between 0 and 1 (got 7)",
        ),
        (["--max-num-seqs=-5"], "--max-num-seqs must be a positive whole number (got -5)"),
        (["--max-num-seqs", "-5"], "--max-num-seqs must be a positive whole number (got -5)"),
        (["--block-size=17"], "--block-size must be one of 1, 8, 16, 32, 64, 128, 256 (got 17)"),
        (["--max-num-seqs"], "--max-num-seqs needs a value: a positive whole number"),
    ],
)
def test_values_the_engine_refuses_are_a_400_naming_the_flag(
    api_for, operator, deployment, extra_args, message
):
    response = redeploy(api_for(operator), deployment, extra_args)
    assert response.status_code == 400, response.content
    assert response.json() == {"extra_args": [message]}
    assert not ChangeRequest.objects.exists()


@pytest.mark.parametrize(
    "extra_args",
    [
        ["--api-key", "sk-secret"],
        ["--api-key=sk-secret"],
        ["--api_key", "sk-secret"],
        ["--enforce-eager", "sk-secret"],
        ["--x", "sk-proj-abcdefghijklmnop123"],
    ],
)
def test_a_secret_is_refused_for_the_right_reason_and_never_shown(
    api_for, operator, deployment, extra_args
):
    response = redeploy(api_for(operator), deployment, extra_args)
    assert response.status_code == 400, response.content
    (message,) = response.json()["extra_args"]
    assert "secret" in message and "is not allowed" not in message, message
    assert "sk-secret" not in response.content.decode()
    assert "abcdefghijklmnop" not in response.content.decode()
    assert not ChangeRequest.objects.exists()


def test_a_flag_and_its_value_as_two_items_are_one_argument(api_for, operator, deployment):
    response = redeploy(
        api_for(operator), deployment, ["--max-num-seqs", "64", "--gpu-memory-utilization", "0.9"]
    )
    assert response.status_code == 201, response.content
    target = response.json()["target_revision"]
    assert target["extra_args"] == ["--max-num-seqs=64", "--gpu-memory-utilization=0.9"]
    assert "--max-num-seqs=64 --gpu-memory-utilization=0.9" in target["unit_text"]
