"""Values of extra engine arguments checked as the engine checks them, at request time, at every
entry point (the reading, the model validator, the change form, the service; the API in
tests/api/test_change_arguments.py): `--gpu-memory-utilization=7` is refused here, not by vLLM
at start-up after an approver said yes. `--flag value` reads as `--flag=value` does, and no
refusal shows a secret back."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from controlplane.redaction import looks_secret
from deployments import services
from deployments.forms import ChangeRequestForm
from deployments.models import ChangeRequest, Deployment
from deployments.unit_files.engine_flags import (
    VALUES,
    EngineArgRefused,
    check_extra_args,
    normalise_extra_args,
)
from tests import factories as f

# (extra arguments as `--flag=value`, the refusal's words)
REFUSED = {
    "memory share above 1": (
        "--gpu-memory-utilization=7",
        "--gpu-memory-utilization must be a number between 0 and 1 (got 7)",
    ),
    "memory share of 0": ("--gpu-memory-utilization=0", "between 0 and 1 (got 0)"),
    "memory share not a number": ("--gpu-memory-utilization=most", "between 0 and 1 (got most)"),
    "memory share NaN": ("--gpu-memory-utilization=nan", "between 0 and 1 (got nan)"),
    "abbreviated memory share": ("--gpu-memory=1.5", "--gpu-memory-utilization must be"),
    "SGLang memory share": ("--mem-fraction-static=1.01", "--mem-fraction-static must be"),
    "negative sequences": (
        "--max-num-seqs=-5",
        "--max-num-seqs must be a positive whole number (got -5)",
    ),
    "zero sequences": ("--max-num-seqs=0", "--max-num-seqs must be a positive whole number"),
    "fractional sequences": ("--max-num-seqs=2.5", "positive whole number (got 2.5)"),
    "underscored sequences": ("--max_num_seqs=0", "--max-num-seqs must be"),
    "batched tokens": ("--max-num-batched-tokens=-1", "--max-num-batched-tokens must be"),
    "batched tokens, binary decimal": ("--max-num-batched-tokens=1.5K", "(got 1.5K)"),
    "pipeline parallel 0": ("--pipeline-parallel-size=0", "--pipeline-parallel-size must be"),
    "data parallel 0": ("--data-parallel-size=0", "--data-parallel-size must be"),
    "SGLang data parallel": ("--dp-size=-2", "--dp-size must be a positive whole number"),
    "block size": ("--block-size=17", "--block-size must be one of 1, 8, 16, 32, 64, 128"),
    "dtype": ("--dtype=fp16", "--dtype must be one of auto, half, float16, bfloat16"),
    "kv cache dtype": ("--kv-cache-dtype=fp9", "--kv-cache-dtype must be one of auto"),
    "quantization": ("--quantization=int3", "--quantization must be one of awq"),
    "rpc port": ("--data-parallel-rpc-port=70000", "must be a port from 1 to 65535"),
    "node rank": ("--node-rank=-1", "--node-rank must be a whole number, 0 or more"),
    "executor": ("--distributed-executor-backend=slurm", "one of external_launcher, mp"),
}
ACCEPTED = [
    ("--gpu-memory-utilization=0.95", "--gpu-memory-utilization=0.95"),
    ("--gpu-memory-utilization=1", "--gpu-memory-utilization=1"),
    ("--gpu_memory_utilization=.9", "--gpu-memory-utilization=.9"),
    ("--mem-fraction-static=0.85", "--mem-fraction-static=0.85"),
    ("--max-num-seqs=64", "--max-num-seqs=64"),
    ("--max-num-seqs=None", "--max-num-seqs=None"),  # optional_type: the engine's default
    ("--max-num-batched-tokens=32k", "--max-num-batched-tokens=32k"),
    ("--max-num-batched-tokens=8K", "--max-num-batched-tokens=8K"),
    ("--pipeline-parallel-size=2", "--pipeline-parallel-size=2"),
    ("--block-size=32", "--block-size=32"),
    ("--dtype=bfloat16", "--dtype=bfloat16"),
    ("--kv-cache-dtype=fp8_e4m3", "--kv-cache-dtype=fp8_e4m3"),
    ("--kv-cache-dtype=bf16", "--kv-cache-dtype=bf16"),  # SGLang's spelling
    ("--quantization=modelopt_fp4", "--quantization=modelopt_fp4"),
    ("--quantization=w8a8_fp8", "--quantization=w8a8_fp8"),  # SGLang's
    ("--seed=-1", "--seed=-1"),
    ("--swap-space=16", "--swap-space=16"),  # a flag whose value is not checked here
]


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
@pytest.mark.parametrize("form", ["equals", "separate"])
def test_values_the_engine_refuses_are_refused_saying_what_it_accepts(case, form):
    arg, words = REFUSED[case]
    args = [arg] if form == "equals" else arg.split("=", 1)
    with pytest.raises(EngineArgRefused) as refused:
        check_extra_args(args)
    assert words in str(refused.value)


@pytest.mark.parametrize(("arg", "stored"), ACCEPTED)
@pytest.mark.parametrize("form", ["equals", "separate"])
def test_values_the_engine_takes_are_taken(arg, stored, form):
    args = [arg] if form == "equals" else arg.split("=", 1)
    assert check_extra_args(args) == [stored]


@pytest.mark.parametrize("flag", sorted(VALUES))
def test_a_flag_that_takes_a_value_needs_one(flag):
    for args in ([flag], [flag, "--enforce-eager"]):
        with pytest.raises(EngineArgRefused, match=f"^{flag} needs a value: "):
            check_extra_args(args)
    with pytest.raises(EngineArgRefused, match="does not exist"):
        check_extra_args(["--no-" + flag[2:]])


WORDS = ["7", "-5", "0", "0.95", "64", "abc", "fp8", "-1", "$(reboot)", "a b", "-x", ""]
FLAGS = [*sorted(VALUES), "--enforce-eager", "--swap-space", "--tensor-parallel-size", "--x"]


def _outcome(args: list[str]) -> str | list[str]:
    try:
        return check_extra_args(args)
    except EngineArgRefused as exc:
        return str(exc)


@pytest.mark.parametrize("flag", FLAGS)
def test_flag_value_and_flag_equals_value_read_the_same(flag):
    """As argparse reads them, for every flag: a separate value (a negative number included)
    is the value, with the same outcome as `--flag=value`, or both are refused."""
    for word in WORDS:
        separate, joined = _outcome([flag, word]), _outcome([f"{flag}={word}"])
        if word == "-x":
            continue  # argparse reads `--flag -x` as two options, `--flag=-x` as one
        if flag == "--enforce-eager" or word == "":
            # A switch with a word after it, or with `=`; an empty word: both refused.
            assert isinstance(separate, str) and isinstance(joined, str), (word, separate, joined)
        else:
            assert separate == joined, (flag, word)


SECRETS = ["sk-secret", "sk-proj-abcdefghijklmnop123", "hf_abcdefghijklmnopqrstuvwxyz1234"]
# Arguments that carry a secret, as people type them, and the reason a refusal must give.
WITH_SECRETS = [
    (["--api-key", "SECRET"], "--api-key would put a secret in the unit file"),
    (["--api-key=SECRET"], "--api-key would put a secret in the unit file"),
    (["--api_key", "SECRET"], "--api-key would put a secret in the unit file"),
    (["--api-k", "SECRET"], "--api-key would put a secret in the unit file"),
    (["--api", "SECRET"], "--api is ambiguous"),  # --api-key, --api-server-count
    (["--hf-token", "SECRET"], "--hf-token would put a secret"),
    (["--admin-api-key", "SECRET"], "--admin-api-key would put a secret"),  # SGLang's
    (["--openai-api-key", "SECRET"], "--openai-api-key would put a secret"),
    (["--enforce-eager", "SECRET"], "is not a flag; --enforce-eager takes no value"),
    (["SECRET"], "is not a flag"),
    (["--max-num-seqs", "SECRET"], "the value of --max-num-seqs looks like a secret"),
    (["--gpu-memory-utilization=SECRET"], "the value of --gpu-memory-utilization looks like"),
    (["--x", "SECRET"], "the value of --x looks like a secret"),  # a flag of a plugin, say
    (["--x=SECRET"], "the value of --x looks like a secret"),
    (["--x=SECRET!"], "the value of --x looks like a secret"),
    (["-kSECRET"], "short option"),
    (["--SECRET"], "not a flag name"),
]


@pytest.mark.parametrize("secret", SECRETS)
@pytest.mark.parametrize(("args", "reason"), WITH_SECRETS)
def test_no_refusal_shows_a_secret_back(args, reason, secret):
    assert looks_secret(secret)
    typed = [a.replace("SECRET", secret) for a in args]
    with pytest.raises(EngineArgRefused) as refused:
        check_extra_args(typed)
    message = str(refused.value)
    assert reason in message
    assert secret not in message and secret[-8:] not in message


def test_the_model_validator_refuses_bad_values_naming_the_field(db):
    deployment = Deployment(
        host=f.make_host("gpu-01"), unit=f.UNIT, model=f.make_catalog()["NVFP4"],
        extra_args=["--gpu-memory-utilization", "7"],
    )  # fmt: skip
    with pytest.raises(ValidationError) as refused:
        deployment.full_clean(validate_unique=False, validate_constraints=False)
    assert refused.value.message_dict["extra_args"] == [
        "--gpu-memory-utilization must be a number between 0 and 1 (got 7)"
    ]
    deployment.extra_args = ["--api-key", "sk-secret"]
    with pytest.raises(ValidationError) as refused:
        deployment.full_clean(validate_unique=False, validate_constraints=False)
    (message,) = refused.value.message_dict["extra_args"]
    assert "--api-key would put a secret" in message and "sk-secret" not in message
    deployment.extra_args = ["--max-num-seqs", "64", "--enforce-eager"]  # as typed, read as one
    deployment.full_clean(validate_unique=False, validate_constraints=False)


def form(extra_args: str) -> ChangeRequestForm:
    return ChangeRequestForm(
        {"snapshot_id": 1, "reason": "tune it", "extra_args": extra_args}, kind="redeploy"
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("typed", "reason"),
    [
        ("--gpu-memory-utilization=7", "--gpu-memory-utilization must be a number between 0 and 1"),
        ("--max-num-seqs -5", "--max-num-seqs must be a positive whole number (got -5)"),
        ("--api-key sk-secret", "--api-key would put a secret in the unit file"),
        ("--api-key=sk-secret", "--api-key would put a secret in the unit file"),
        ("--enforce-eager sk-proj-abcdefghijklmnop123", "is not a flag"),
    ],
)
def test_the_change_form_refuses_with_the_reason_and_not_the_secret(typed, reason):
    bound = form(typed)
    assert not bound.is_valid()
    (message,) = [str(e) for e in bound.errors["extra_args"]]
    assert reason in message
    shown = str(bound["extra_args"])
    assert "sk-secret" not in message + shown and "abcdefghijklmnop" not in message + shown
    if "sk-" not in typed:
        assert typed in shown  # an ordinary mistake stays in the field, to be corrected


@pytest.mark.django_db
def test_the_change_form_takes_a_flag_and_its_value_as_two_words():
    bound = form("--max-num-seqs 64 --gpu-memory-utilization 0.95")
    assert bound.is_valid(), bound.errors
    assert bound.cleaned_data["extra_args"] == [
        "--max-num-seqs", "64", "--gpu-memory-utilization", "0.95",
    ]  # fmt: skip


def test_the_change_page_refuses_without_showing_the_secret(operator, deployment, client):
    client.force_login(operator)
    snapshot = f.make_snapshot(deployment.host)
    url = reverse("deployments:change_form", args=[deployment.pk, "redeploy"])
    response = client.post(
        url, {"snapshot_id": snapshot.pk, "reason": "lock it", "extra_args": "--api-key sk-secret"}
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "--api-key would put a secret in the unit file" in page
    assert "sk-secret" not in page
    assert not ChangeRequest.objects.exists()


@pytest.mark.parametrize(
    ("extra_args", "reason"),
    [
        (["--gpu-memory-utilization=7"], "must be a number between 0 and 1 (got 7)"),
        (["--max-num-seqs", "-5"], "--max-num-seqs must be a positive whole number (got -5)"),
        (["--block-size", "17"], "--block-size must be one of"),
        (["--api-key", "sk-secret"], "--api-key would put a secret"),
    ],
)
def test_the_service_refuses_values_the_engine_refuses(operator, deployment, extra_args, reason):
    with pytest.raises(services.ChangeRefused) as refused:
        services.change_request_create(
            user=operator, deployment=deployment, kind="redeploy",
            snapshot=f.make_snapshot(deployment.host), reason="tune it", extra_args=extra_args,
        )  # fmt: skip
    assert reason in refused.value.message and "sk-secret" not in refused.value.message
    assert not ChangeRequest.objects.exists()


def test_a_revision_reads_the_values_the_same_way():
    """What revisions render from (normalise_extra_args) checks the values too."""
    assert normalise_extra_args(["--max_num_seqs", "64"]) == ["--max-num-seqs=64"]
    with pytest.raises(EngineArgRefused, match="--max-num-seqs must be a positive whole"):
        normalise_extra_args(["--max_num_seqs", "0"])
