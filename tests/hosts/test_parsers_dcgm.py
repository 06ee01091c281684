"""DCGM's diagnostic as `dcgmi diag -r N -j` prints it (hosts.parsers.dcgm): DCGM 3's JSON from
NVIDIA's own test strings, DCGM 4's shape, and the answers of a host where it cannot run."""

from __future__ import annotations

import json

import pytest

from hosts.parsers.dcgm import parse_gpu_diagnostic

from .parser_samples import sample


def test_dcgm3_json_each_test_at_its_worst_on_the_gpus_it_judged() -> None:
    result = parse_gpu_diagnostic(sample("dcgmi_diag_json_dcgm3.json"), 2)
    assert (result.level, result.version, result.error) == (2, "1.7", None)
    assert len(result.tests) == 17
    (failed,) = result.failed
    assert (failed.category, failed.name, failed.gpus) == ("Stress", "sm_stress", [0, 2, 3])
    assert failed.warnings[0].startswith("Max stress level of 2128.7 did not exceed")
    memory = next(t for t in result.tests if t.name == "memory")
    assert (memory.status, memory.gpus) == ("pass", [1, 2, 3])  # GPU 0 skipped
    denylist = next(t for t in result.tests if t.name == "Denylist")
    assert (denylist.status, denylist.gpus) == ("pass", [0, 1, 2, 3])


def test_dcgm4_json_with_entities_and_a_summary() -> None:
    body = {
        "DCGM Diagnostic": {
            "test_categories": [
                {"category": "Hardware", "tests": [{
                    "name": "memory", "test_summary": {"status": "Fail"},
                    "results": [
                        {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0,
                         "status": "Pass"},
                        {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 5,
                         "status": "Fail", "warnings": [{"warning": "DBE on GPU 5",
                         "error_id": 1, "error_category": 1, "error_severity": 1}]},
                    ]}]},
                {"category": "Deployment", "tests": [
                    {"name": "Persistence Mode", "test_summary": {"status": "Warn"},
                     "results": []}]},
            ]
        },
        "metadata": {"version": "4.2.3"},
    }  # fmt: skip
    result = parse_gpu_diagnostic(json.dumps(body), 1)
    assert result.version == "4.2.3"
    assert [(t.name, t.status, t.gpus) for t in result.tests] == [
        ("memory", "fail", [5]),
        ("Persistence Mode", "warn", []),
    ]
    assert result.failed[0].warnings == ["DBE on GPU 5"]


@pytest.mark.parametrize(
    "text, error",
    [
        ("bash: line 1: dcgmi: command not found\n", "DCGM is not installed"),
        ("", "dcgmi printed nothing"),
        ("Error: unable to establish a connection to the specified host: localhost\n",
         "Error: unable to establish a connection"),
        ('{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deploy', "{"),  # cut short
        ('{"DCGM Diagnostic": {"runtime_error": "Cannot run diagnostic: MIG"}}', "MIG"),
        ('{"DCGM GPU Diagnostic": {"test_categories": []}}', "reported no tests"),
        ("[1, 2, 3]", "[1, 2, 3]"),
    ],
)  # fmt: skip
def test_a_diagnostic_that_did_not_run_says_why_and_has_no_tests(text: str, error: str) -> None:
    result = parse_gpu_diagnostic(text, 1)
    assert result.tests == [] and result.error is not None and error in result.error
