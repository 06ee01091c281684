"""The Grafana dashboard in the repository is valid JSON and asks only for series that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from controlplane.monitoring.collector import ControlPlaneCollector
from tests import factories as f

DASHBOARD = Path(__file__).resolve().parents[2] / "controlplane/monitoring/grafana-dashboard.json"


def panels(dashboard: dict) -> list[dict]:
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found += panel.get("panels", [])
    return found


def test_the_dashboard_is_grafana_json_with_the_panels_people_look_for():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["title"] and dashboard["uid"] and dashboard["schemaVersion"] >= 36
    titles = " | ".join(p.get("title", "") for p in panels(dashboard)).lower()
    for wanted in (
        "gpu memory",
        "power",
        "snapshot age",
        "probe outcomes",
        "job outcomes",
        "approvals waiting",
        "audit verification",
    ):
        assert wanted in titles, wanted


@pytest.mark.django_db
def test_every_series_the_dashboard_queries_is_exported():
    f.make_snapshot(f.make_host("gpu-01"))
    exported = {family.name for family in ControlPlaneCollector().collect()}
    dashboard = json.loads(DASHBOARD.read_text())
    queried = set()
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            queried |= set(re.findall(r"controlplane_[a-z_]+", target["expr"]))
    assert queried, "the dashboard queries nothing"
    assert queried <= exported, queried - exported
