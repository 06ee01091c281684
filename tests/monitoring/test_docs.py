"""The monitoring README names every series /metrics exports and every alert the rules ship, so
what an operator reads is what Prometheus gets."""

from __future__ import annotations

import pytest
import yaml

from controlplane.monitoring.collector import ControlPlaneCollector
from tests import factories as f

from .prometheus import ALERTS, MONITORING

README = (MONITORING / "README.md").read_text()


@pytest.mark.django_db
def test_every_family_is_documented():
    f.make_snapshot(f.make_host("gpu-01"))
    families = {family.name for family in ControlPlaneCollector().collect()}
    missing = {name for name in families if f"`{name.removeprefix('controlplane_')}`" not in README}
    assert not missing, missing


def test_every_alert_is_documented():
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    alerts = {rule["alert"] for group in groups for rule in group["rules"]}
    assert {a for a in alerts if f"`{a}`" not in README} == set()
