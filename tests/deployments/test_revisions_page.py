"""The revision comparison page: every revision with who and when, benchmark figures and
curves, coherence results, and the diff of any two unit files."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from tests import factories as f
from tests.revision_history import make_week_history

pytestmark = pytest.mark.django_db


@pytest.fixture
def week(operator):
    return make_week_history(f.make_host("gpu-01"), operator)


def page(client, user, deployment, query=""):
    client.force_login(user)
    return client.get(reverse("deployments:revisions", args=[deployment.pk]) + query)


def figures(html: str, revision: int) -> dict[int, float]:
    found = re.findall(
        rf'data-revision="{revision}" data-concurrency="(\d+)" data-tok-s="([\d.]+)"', html
    )
    return {int(level): float(value) for level, value in found}


def test_the_week_reads_on_one_page(client, viewer, week):
    response = page(client, viewer, week)
    assert response.status_code == 200
    html = response.content.decode()
    # Four revisions, oldest first: NVFP4 adopted, MiniMax rolled back, MiniMax, INT4 serving.
    rows = re.findall(r'<tr id="revision-(\d+)"', html)
    assert rows == ["1", "2", "3", "4"]
    assert 'id="revision-4" class="current-revision"' in html
    assert "system:rendered" in html  # no unit on the host to adopt: the first was rendered
    assert "rolled back" in html and "otto" in html
    int4, minimax, nvfp4 = figures(html, 4), figures(html, 3), figures(html, 1)
    assert sorted(int4) == [1, 8, 32, 64]
    assert int4[1] == pytest.approx(82, rel=0.1) and int4[64] == pytest.approx(2200, rel=0.1)
    assert nvfp4[1] == pytest.approx(45, rel=0.1) and nvfp4[64] == pytest.approx(1100, rel=0.1)
    assert int4[64] > minimax[64] > nvfp4[64]
    assert figures(html, 2) == {}  # the rolled-back revision was never benchmarked


def test_levels_stored_before_itl_was_per_chunk_show_it_per_token(client, viewer, week):
    """The week's figures were stored with ITL per token (no schema key): the page shows them
    under per token and no per-chunk ITL, on the table and in each run's detail."""
    from deployments.models import Evaluation

    html = page(client, viewer, week).content.decode()
    stored = Evaluation.objects.filter(revision__number=4, kind="benchmark").first()
    per_token = stored.results["levels"][0]["itl_ms"]["p50"]
    assert "ITL per token p50" in html and "stored before ITL was measured per chunk" in html
    assert f"{per_token:.1f} ms</td><td>" in html


def test_the_chart_data_is_a_json_block_for_the_static_script(client, viewer, week):
    html = page(client, viewer, week).content.decode()
    block = re.search(
        r'<script id="revision-chart-data" type="application/json">(.*?)</script>', html, re.S
    )
    data = json.loads(block.group(1))
    assert data["levels"] == [1, 8, 32, 64]
    assert [s["revision"] for s in data["series"]] == [1, 3, 4]
    assert all(len(s["tok_s"]) == len(s["ttft_p50_ms"]) == 4 for s in data["series"])
    assert "js/revision-charts.js" in html
    assert "<script>" not in html  # nothing inline: the coming CSP forbids it


def test_coherence_results_per_revision(client, viewer, week):
    html = page(client, viewer, week).content.decode()
    table = html[html.index('id="coherence-results"') :]
    for name in ("factual", "five-token prompt", "multi-turn chat", "long-context recall"):
        assert f"<th>{name}</th>" in table
    # The rolled-back MiniMax revision failed on the patched engine; the others pass now.
    row = re.search(r"<td>r2 MiniMax-M2.5 FP8</td>(.*?)</tr>", table, re.S).group(1)
    assert row.count("outcome-failed") == 2


def test_two_unit_files_side_by_side(client, viewer, week):
    html = page(client, viewer, week, "?a=3&b=4").content.decode()
    diff = html[html.index('class="unit-diff"') :]
    assert '<span class="diff-remove">-ExecStart=' in diff and "MiniMax-M2.5-FP8" in diff
    assert '<span class="diff-add">+ExecStart=' in diff and "Kimi-K2.5-INT4" in diff
    same = page(client, viewer, week, "?a=4&b=4").content.decode()
    assert "The two unit files are the same." in same


def test_nonsense_revision_numbers_show_no_diff(client, viewer, week):
    for query in ("?a=99&b=1", "?a=x&b=1", "?a=-1&b=2", "?a=99999999999999999999&b=1"):
        response = page(client, viewer, week, query)
        assert response.status_code == 200
        assert "Pick two revisions" in response.content.decode()


def test_people_without_a_role_may_not_see_it(client, outsider, week):
    assert page(client, outsider, week).status_code == 403


def test_an_unknown_deployment_is_a_404(client, viewer):
    client.force_login(viewer)
    assert client.get(reverse("deployments:revisions", args=[987654])).status_code == 404
