"""The shipped alerting rules, through Debian's real promtool: valid, every alert unit-tested
firing and quiet, and reading only series /metrics exports."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from controlplane.monitoring.collector import ControlPlaneCollector
from deployments.verdict_table import XID_FATAL
from tests import factories as f

from .prometheus import ALERT_TESTS, ALERTS, MONITORING, debian_binary

pytestmark = pytest.mark.integration


def rules() -> list[dict]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = debian_binary("promtool")
    return subprocess.run(
        [binary, *args], cwd=MONITORING, capture_output=True, text=True, timeout=60
    )


def test_promtool_checks_the_rules():
    result = promtool("check", "rules", ALERTS.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


def test_every_alert_passes_its_unit_tests():
    result = promtool("test", "rules", ALERT_TESTS.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_firing_and_a_quiet_case():
    cases: dict[str, set[str]] = {}
    for test in yaml.safe_load(ALERT_TESTS.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            found = "fires" if case.get("exp_alerts") else "quiet"
            cases.setdefault(case["alertname"], set()).add(found)
    for rule in rules():
        assert cases.get(rule["alert"]) == {"fires", "quiet"}, rule["alert"]


def test_the_fatal_xids_are_the_verdict_tables():
    [rule] = [r for r in rules() if r["alert"] == "GpuFatalXid"]
    listed = re.search(r'xid=~"([0-9|]+)"', rule["expr"]).group(1)
    assert {int(x) for x in listed.split("|")} == set(XID_FATAL)


@pytest.mark.django_db
def test_every_series_the_rules_read_is_exported():
    f.make_snapshot(f.make_host("gpu-01"))
    exported = {family.name for family in ControlPlaneCollector().collect()}
    read = {name for rule in rules() for name in re.findall(r"controlplane_[a-z_]+", rule["expr"])}
    assert read and read <= exported, read - exported
