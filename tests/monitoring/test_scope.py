"""/metrics with host groups: a person signed in reads the hosts of their scope, and counts
only theirs; a scraper with METRICS_TOKEN reads every host."""

from __future__ import annotations

import pytest

from deployments import services

from .conftest import parse

pytestmark = pytest.mark.django_db


def test_a_person_reads_the_metrics_of_their_hosts_and_a_scraper_all(
    client, teams, scoped, operator, scrape
):
    for name in ("gpu-01", "gpu-03"):
        services.change_request_create(
            user=operator, deployment=teams.deployments[name], kind="model_swap",
            snapshot=teams.snapshots[name], reason="faster", model=teams.catalog["INT4"],
        )  # fmt: skip
    everything = scrape()
    assert {ls["host"] for ls, _ in everything.series("controlplane_host_up")} == {
        "gpu-01", "gpu-02", "gpu-03"
    }  # fmt: skip
    assert everything.value("controlplane_approvals_waiting") == 2
    client.force_login(scoped("ann", "viewer", "team-a"))
    response = client.get("/metrics")
    assert response.status_code == 200
    mine = parse(response.content.decode())
    hosts = {ls.get("host") for name, ls, _ in mine.samples if "host" in ls}
    assert hosts == {"gpu-02", "gpu-03"}
    assert mine.value("controlplane_approvals_waiting") == 1
    outcomes = mine.series("controlplane_probe_outcomes", status="ok")
    assert {ls["host"] for ls, _ in outcomes} == {"gpu-02", "gpu-03"}
