"""/api/v1/snapshots/<id>/diff/<other>/: material fingerprints compared as the drift check
compares them."""

from __future__ import annotations

import pytest

from tests import factories as f

pytestmark = pytest.mark.django_db


def diff(client, a, b):
    return client.get(f"/api/v1/snapshots/{a.pk}/diff/{b.pk}/")


def test_an_unchanged_host_has_no_differences(api_for, viewer, deployment):
    first, second = f.make_snapshot(deployment.host, age=60), f.make_snapshot(deployment.host)
    response = diff(api_for(viewer), first, second)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["differences"] == []
    assert body["before"]["id"] == first.pk and body["after"]["id"] == second.pk
    assert body["before_host"] == body["after_host"] == "gpu-01"


def test_each_material_difference_is_named_with_both_values(api_for, viewer, deployment):
    first = f.make_snapshot(deployment.host)
    second = f.make_snapshot(deployment.host, parsed=f.parsed_state(main_pid=777, gpus=7))
    body = diff(api_for(viewer), first, second).json()
    changed = {d["field"]: (d["before"], d["after"]) for d in body["differences"]}
    assert changed["gpu_count"] == (8, 7)
    assert any(v == (41003, 777) for k, v in changed.items() if "main_pid" in k), changed
    # Not material: what the drift check ignores (power, temperature) is not a difference.
    power = f.parsed_state()
    power["gpus"][0]["power_draw_w"] = 400.0
    assert (
        diff(api_for(viewer), first, f.make_snapshot(deployment.host, parsed=power)).json()[
            "differences"
        ]
        == []
    )


def test_a_missing_snapshot_is_a_404(api_for, viewer, deployment):
    first = f.make_snapshot(deployment.host)
    response = api_for(viewer).get(f"/api/v1/snapshots/{first.pk}/diff/{first.pk + 99}/")
    assert response.status_code == 404
    assert api_for(None).get(f"/api/v1/snapshots/{first.pk}/diff/{first.pk}/").status_code == 401
