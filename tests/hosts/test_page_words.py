"""What the fleet and host pages say without hovering: the share of memory under each GPU bar,
"nothing to repair" on a clean engine, a partial snapshot's error once, and charts that open
on the window that has data."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from hosts.charts import window_with_data
from hosts.models import StateSnapshot
from hosts.state import snapshot_digest
from tests import factories as f
from tests.gpu_history import every, make_gpu_history

pytestmark = pytest.mark.django_db
PATCHED = "vllm/model_executor/layers/fused_moe/fused_moe.py"
DRIVER = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."


def get(client, user, url, **params):
    client.force_login(user)
    response = client.get(url, params)
    assert response.status_code == 200
    return response.content.decode()


def test_each_gpu_bar_says_its_share_and_the_row_the_total(client, viewer):
    host = f.make_host("gpu-01")
    f.make_snapshot(host, parsed=f.parsed_state(used_mib=90056))
    body = get(client, viewer, reverse("hosts:dashboard"))
    row = body[body.index(f'id="host-row-{host.pk}"') :].split("</tr>", 1)[0]
    assert row.count('<span class="gpubar-pct">92</span>') == 8
    assert '<span class="gpubars-total">704 / 765 GiB · % per GPU</span>' in row


def test_a_clean_engine_has_nothing_to_repair(client, operator):
    host = f.make_host("gpu-01")
    deployment = f.make_deployment(host, f.make_catalog()["NVFP4"])
    url = reverse("hosts:detail", args=[host.name])
    repair = reverse("deployments:change_form", args=[deployment.pk, "engine_repair"])
    f.make_snapshot(host)
    assert f'href="{repair}"' in get(client, operator, url)  # never checked: offered

    f.make_integrity_snapshot(host)
    body = get(client, operator, url)
    assert f'href="{repair}"' not in body
    assert "engine clean: nothing to repair" in body
    form = get(client, operator, repair)
    assert 'id="preflight-nothing-to-repair"' in form and "no blocking problem" not in form

    f.make_integrity_snapshot(host, modified=(PATCHED,))
    assert f'href="{repair}"' in get(client, operator, url)


def test_a_partial_snapshots_status_line_says_each_error_once(client, viewer):
    host = f.make_host("gpu-01")
    parsed = f.parsed_state()
    sections = ("gpus", "gpu_details", "compute_apps", "nvlink", "topology")
    parsed["problems"] = [{"section": s, "message": DRIVER} for s in sections]
    # stored as the probe stores it: every section's failure, one after another (hosts.probe)
    StateSnapshot.objects.create(
        host=host, taken_at=timezone.now(), status="partial", trigger="manual", duration_ms=90,
        parsed=parsed, digest=snapshot_digest(parsed),
        error="; ".join(f"{s}: {DRIVER}" for s in sections),
    )  # fmt: skip
    body = get(client, viewer, reverse("hosts:detail", args=[host.name]))
    status = re.search(r"<dt>status</dt><dd>(.*?)</dd>", body, re.S).group(1)
    assert status.count("NVIDIA-SMI has failed") == 1
    assert f"{', '.join(sections)}: NVIDIA-SMI has failed" in status


def test_the_charts_open_on_the_window_that_has_data(client, viewer):
    host = f.make_host("gpu-01")
    url = reverse("hosts:detail", args=[host.name])
    assert window_with_data(host) == "24h"  # nothing at all: the default
    now = timezone.now()
    make_gpu_history(host, times=every(5, until=now, span=dt.timedelta(minutes=30)))
    assert window_with_data(host) == "1h"
    assert 'data-window="1h"' in get(client, viewer, url)
    assert 'data-window="7d"' in get(client, viewer, url, window="7d")  # what the address asks

    make_gpu_history(host, times=[now - dt.timedelta(hours=5)])
    assert window_with_data(host) == "24h"
    assert 'data-window="24h"' in get(client, viewer, url)
