"""Serving benchmark profiles and runs: validation, one bounded command per level, what a level
measured, and a run against the revision's own baseline."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from deployments.evaluation import benchmark
from deployments.host_scripts import serving_bench
from deployments.models import BenchmarkProfile
from hosts import commands
from tests import factories as f

pytestmark = pytest.mark.django_db
PYTHON = "/opt/vllm/.venv/bin/python3"


def definition(**kw):
    base = {
        "id": 1, "name": "standard", "concurrency_levels": [1, 8, 32, 64], "input_tokens": 128,
        "output_tokens": 256, "requests_per_stream": 1, "duration_seconds": None, "prompts": [],
        "endpoint": "completions",
    }  # fmt: skip
    return {**base, **kw}


def plan(**kw):
    return benchmark.levels(
        definition(**kw), engine_python=PYTHON, port=8000, served_name="kimi-k2.5",
        command_limit=60,
    )  # fmt: skip


def test_one_command_per_level_with_the_script_on_stdin_and_no_sudo():
    levels = plan()
    assert [lv.concurrency for lv in levels] == [1, 8, 32, 64]
    argv = levels[2].argv
    assert argv[:3] == [PYTHON, "-I", "-"] and "sudo" not in argv
    assert argv[argv.index("--concurrency") + 1] == "32"
    assert argv[argv.index("--num-requests") + 1] == "32"  # one request per stream
    assert argv[argv.index("--timeout") + 1] == "55"  # each request ends within the command
    assert all(lv.timeout == 60 for lv in levels)
    assert "--url" in argv and argv[argv.index("--url") + 1] == "http://127.0.0.1:8000"
    # What the client accepts, it parses the same way.
    assert serving_bench.parse_args(argv[3:]).concurrency == 32


def test_a_duration_level_keeps_its_requests_inside_the_command_limit():
    argv = plan(requests_per_stream=None, duration_seconds=20)[0].argv
    assert "--num-requests" not in argv
    assert argv[argv.index("--duration") + 1] == "20"
    assert float(argv[argv.index("--timeout") + 1]) == 60 - 5 - 20


def test_a_prompt_set_goes_on_the_command_line_one_prompt_each():
    argv = plan(prompts=["Summarise: the sea", "Translate: the sky"])[0].argv
    assert argv.count("--prompt") == 2 and "Translate: the sky" in argv
    assert serving_bench.parse_args(argv[3:]).prompt == ["Summarise: the sea", "Translate: the sky"]
    assert "'Translate: the sky'" in commands.join(argv)  # quoted for the remote shell


def test_a_hostile_served_name_or_level_never_reaches_a_command():
    with pytest.raises(commands.UnsafeCommand):
        benchmark.levels(
            definition(), engine_python=PYTHON, port=8000, served_name="x; reboot",
            command_limit=60,
        )  # fmt: skip
    with pytest.raises(commands.UnsafeCommand):
        plan(concurrency_levels=[1024])


def test_what_a_level_measured_and_what_fails_it():
    good = {
        "ok": True, "version": 2, "concurrency": 8, "requests": 8, "completed": 8, "errors": 0,
        "duration_s": 4.0, "output_tokens": 2048, "input_tokens": 1024, "output_tok_s": 512.0,
        "total_tok_s": 768.0, "requests_s": 2.0,
        "ttft_ms": {"mean": 140.0, "p50": 130.0, "p99": 200.0},
        "itl_ms": {"mean": 54.0, "p50": 53.5, "p99": 80.0},
        "itl_per_token_ms": {"mean": 14.0, "p50": 13.5, "p99": 20.0},
        "tpot_ms": {"mean": 14.0, "p50": 14.0, "p99": 15.0},
        "e2el_ms": {"mean": 3700.0, "p50": 3700.0, "p99": 3900.0},
        "input_tokens_asked": 128, "input_tokens_sent": {"mean": 128.0, "min": 128, "max": 128},
        "input_counted_by": "tokenize", "error_samples": [], "notes": [],
    }  # fmt: skip
    level = benchmark.level_result(8, json.dumps(good))
    assert level["output_tok_s"] == 512.0 and level["ttft_ms"] == {"p50": 130.0, "p99": 200.0}
    assert level["schema"] == benchmark.LEVEL_SCHEMA == 2
    assert level["itl_ms"] == {"p50": 53.5, "p99": 80.0}  # per chunk, as vllm bench serve
    assert level["itl_per_token_ms"] == {"p50": 13.5, "p99": 20.0}
    assert level["input_tokens_asked"] == 128 and level["input_counted_by"] == "tokenize"
    assert benchmark.level_as_read(level) == level
    assert benchmark.level_failed(level) is None
    bad = {**good, "completed": 6, "errors": 2, "error_samples": ["HTTP 500: dead"]}
    assert "2 of 8 requests failed (HTTP 500: dead)" in benchmark.level_failed(
        benchmark.level_result(8, json.dumps(bad))
    )
    garbage = benchmark.level_result(8, "Traceback (most recent call last)")
    assert "not JSON" in garbage["error"]
    passed, summary = benchmark.run_summary([level], wanted=2)
    assert not passed and "1 of 2 levels did not run" in summary


def test_levels_stored_before_itl_was_per_chunk_read_as_per_token():
    """Rows stored by client version 1 have no schema key and a per-token itl_ms: read, it is
    itl_per_token_ms, and the per-chunk ITL is unknown, on every page and in the API."""
    old = {
        "concurrency": 8, "output_tok_s": 512.0, "ttft_ms": {"p50": 130.0, "p99": 200.0},
        "itl_ms": {"p50": 13.5, "p99": 20.0}, "tpot_ms": {"mean": 14.0}, "errors": 0,
    }  # fmt: skip
    read = benchmark.level_as_read(old)
    assert read["schema"] == 1 and read["itl_per_token_ms"] == {"p50": 13.5, "p99": 20.0}
    assert read["itl_ms"] == {"p50": None, "p99": None}
    assert old["itl_ms"] == {"p50": 13.5, "p99": 20.0}  # the stored row is left as it is
    failed = {"concurrency": 8, "error": "did not run"}
    assert benchmark.levels_as_read({"levels": [old, failed]})[1] == failed


def test_a_run_against_the_revisions_own_baseline():
    def run(*figures, **profile):
        levels = [
            {"concurrency": c, "output_tok_s": t} for c, t in zip((1, 64), figures, strict=True)
        ]
        return {"profile": definition(**profile), "levels": levels}

    base = run(82.0, 2200.0)
    assert benchmark.throughput_ratio(run(80.0, 1760.0), base) == (0.8, 64)
    assert benchmark.throughput_ratio(run(82.0, 2200.0), base) == (1.0, 1)
    # Other lengths are another benchmark: no ratio.
    assert benchmark.throughput_ratio(run(40.0, 900.0, output_tokens=1024), base) is None


def test_old_changes_that_stored_true_run_no_benchmark():
    assert benchmark.definition_of({"benchmark": True}) is None
    assert benchmark.definition_of({}) is None
    assert benchmark.definition_of({"benchmark": definition()})["name"] == "standard"


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"concurrency_levels": []}, "concurrency_levels"),
        ({"concurrency_levels": [0, 8]}, "concurrency_levels"),
        ({"concurrency_levels": [513]}, "concurrency_levels"),
        ({"concurrency_levels": list(range(1, 10))}, "concurrency_levels"),
        ({"concurrency_levels": [1, 1]}, "concurrency_levels"),
        ({"concurrency_levels": [1.5]}, "concurrency_levels"),
        ({"output_tokens": 100_000}, "output_tokens"),
        ({"duration_seconds": 20}, "__all__"),  # requests per stream too
        ({"requests_per_stream": None}, "__all__"),  # neither
        ({"requests_per_stream": None, "duration_seconds": 600}, "duration_seconds"),
        ({"prompts": ["", "x"]}, "prompts"),
        ({"prompts": ["x"] * 17}, "prompts"),
    ],
)
def test_a_profile_is_validated(fields, error):
    profile = BenchmarkProfile(name="p", **fields)
    with pytest.raises(ValidationError) as raised:
        profile.full_clean()
    assert error in raised.value.message_dict


def test_at_most_one_profile_is_the_default():
    f.default_benchmark_profile()  # the migration's
    assert BenchmarkProfile.objects.filter(is_default=True).count() == 1
    with pytest.raises(IntegrityError), transaction.atomic():
        BenchmarkProfile.objects.create(name="another", is_default=True)
    BenchmarkProfile.objects.create(name="another")  # not the default: fine
