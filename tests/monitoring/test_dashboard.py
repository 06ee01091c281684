"""The Grafana dashboard in the repository is valid JSON and asks only for series that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from controlplane.monitoring.annotations import EVENT_SOURCES, annotation_expr
from controlplane.monitoring.collector import ControlPlaneCollector
from tests import factories as f

DASHBOARD = Path(__file__).resolve().parents[2] / "controlplane/monitoring/grafana-dashboard.json"


def panels(dashboard: dict) -> list[dict]:
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found += panel.get("panels", [])
    return found


def queries(dashboard: dict) -> list[str]:
    """Every PromQL expression the dashboard sends: its panels' and its annotations'."""
    exprs = [target["expr"] for panel in panels(dashboard) for target in panel.get("targets", [])]
    return exprs + [a["expr"] for a in dashboard["annotations"]["list"] if "expr" in a]


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
    for expr in queries(dashboard):
        queried |= set(re.findall(r"controlplane_[a-z_]+", expr))
    assert queried, "the dashboard queries nothing"
    assert queried <= exported, queried - exported


def test_the_fleet_over_time_and_the_evaluations_have_panels():
    dashboard = json.loads(DASHBOARD.read_text())
    shown = {p.get("title", "").lower(): p for p in panels(dashboard)}
    wanted = {
        "fleet gpu memory used": "controlplane_gpu_memory_used_bytes",
        "fleet power draw": "controlplane_gpu_power_draw_watts",
        "gpu utilisation per host, and the fleet": "controlplane_gpu_utilization_ratio",
        "output tokens/s of the serving": "controlplane_benchmark_output_tokens_per_second",
        "ttft p99": "controlplane_benchmark_ttft_seconds",
        "itl p99 and tpot": "controlplane_benchmark_tpot_seconds",
        "coherence of the serving revision": "controlplane_coherence_checks",
        "change jobs queued and running": "controlplane_job_heartbeat_age_seconds",
    }
    for title, series in wanted.items():
        [panel] = [p for t, p in shown.items() if t.startswith(title)]
        assert panel["type"] in {"timeseries", "table", "bargauge"}
        assert any(series in t["expr"] for t in panel["targets"]), title
        # per host, and following the dashboard's host filter
        assert all('host=~"$host"' in t["expr"] for t in panel["targets"]), title


@pytest.mark.django_db
def test_every_event_source_is_drawn_as_an_annotation():
    dashboard = json.loads(DASHBOARD.read_text())
    drawn = {a["name"]: a for a in dashboard["annotations"]["list"]}
    f.make_snapshot(f.make_host("gpu-01"))
    families = {family.name: family for family in ControlPlaneCollector().collect()}
    for source in EVENT_SOURCES:
        annotation = drawn[source.name]
        assert annotation["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert annotation["expr"] == annotation_expr(source)
        assert annotation["useValueForTime"] is True and annotation["enable"] is True
        assert (annotation["titleFormat"], annotation["textFormat"], annotation["tagKeys"]) == (
            source.title,
            source.text,
            source.tags,
        )
        # Every label the annotation shows is one the family has (Grafana would show it empty).
        labels = set(families[source.family]._labelnames)
        shown = set(re.findall(r"{{(\w+)}}", source.title + source.text))
        assert shown | set(source.tags.split(",")) <= labels, labels


def test_panels_have_their_own_ids_and_places():
    dashboard = json.loads(DASHBOARD.read_text())
    every = panels(dashboard)
    assert len({p["id"] for p in every}) == len(every)
    cells: dict[tuple[int, int], str] = {}
    for panel in every:
        box = panel["gridPos"]
        assert box["x"] + box["w"] <= 24, panel["title"]
        for x in range(box["x"], box["x"] + box["w"]):
            for y in range(box["y"], box["y"] + box["h"]):
                assert (x, y) not in cells, (panel["title"], cells.get((x, y)))
                cells[(x, y)] = panel["title"]
