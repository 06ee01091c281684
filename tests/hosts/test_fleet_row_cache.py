"""The fleet's rows are rendered once per change of what they show and kept in a cache shared by
everyone (hosts.templatetags.fleet_rows): a row never shows a fact older than the host's newest
snapshot, verdict, maintenance, host key or groups, and never one person's button or token to
another."""

from __future__ import annotations

import datetime as dt
import pickle
import re

import pytest
from django.core.cache import caches
from django.urls import reverse
from django.utils import timezone

from controlplane.accounts.roles import OPERATOR, ensure_role_groups
from hosts import services
from hosts.choices import VERDICT_SEVERITY, HostKeyStatus
from hosts.models import Host, HostHealth
from hosts.services.groups import host_group_join, host_group_leave
from tests import factories as f

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture(autouse=True)
def rows_cache():
    cache = caches["fragments"]
    cache.clear()
    yield cache
    cache.clear()


def kept(cache) -> list[str]:
    """Every row the cache holds, as HTML."""
    return [pickle.loads(value) for value in cache._cache.values()]


def page(client, url: str = "") -> str:
    response = client.get(url or reverse("hosts:dashboard"))
    assert response.status_code == 200
    return response.content.decode()


def row_of(body: str, host: Host) -> str:
    start = body.index(f'id="host-row-{host.pk}"')
    return body[start : body.index("</tr>", start)]


def judge(host: Host, verdict: str, reasons: list[dict] | None = None) -> None:
    now = timezone.now()
    severity = VERDICT_SEVERITY[verdict]
    HostHealth.objects.update_or_create(
        host=host,
        defaults={"verdict": verdict, "severity": severity, "since": now, "computed_at": now,
                  "reasons": reasons or []},
    )  # fmt: skip


def test_a_new_snapshot_shows_at_once(client, viewer):
    host = f.make_host()
    first = f.make_snapshot(host, age=30)
    client.force_login(viewer)
    row = row_of(page(client), host)
    assert f"/snapshots/{first.pk}/" in row and "kimi-k2.5" in row
    second = f.make_snapshot(host, age=1, parsed=f.parsed_state(model="llama-4", used_mib=100))
    for url in (reverse("hosts:dashboard"), reverse("hosts:dashboard_rows")):
        row = row_of(page(client, url), host)
        assert f"/snapshots/{second.pk}/" in row and f"/snapshots/{first.pk}/" not in row
        assert "llama-4" in row and "kimi-k2.5" not in row
    failed = f.make_snapshot(host, age=0, status="unreachable", parsed={})
    row = row_of(page(client), host)
    assert f"/snapshots/{failed.pk}/" in row and "status-unreachable" in row


def test_a_new_verdict_shows_at_once(client, viewer):
    host = f.make_host()
    f.make_snapshot(host)
    judge(host, "healthy")
    client.force_login(viewer)
    assert 'data-verdict="healthy"' in row_of(page(client), host)
    judge(host, "failed", [{"level": "failed", "text": "GPU 3 fell off the bus"}])
    row = row_of(page(client, reverse("hosts:dashboard_rows")), host)
    assert 'data-verdict="failed"' in row and "GPU 3 fell off the bus" in row


def test_maintenance_shows_when_it_begins_and_goes_when_it_ends(
    client, viewer, operator, time_machine
):
    host = f.make_host()
    f.make_snapshot(host)
    client.force_login(viewer)
    assert "maintenance-badge" not in row_of(page(client), host)
    until = timezone.now() + dt.timedelta(minutes=10)  # (well within the cache's timeout)
    services.host_maintenance_enter(host=host, user=operator, reason="reseating GPU 3", until=until)
    assert "reseating GPU 3" in row_of(page(client), host)
    services.host_maintenance_leave(host=Host.objects.get(pk=host.pk), user=operator)
    assert "maintenance-badge" not in row_of(page(client), host)
    # its end time passing changes no row in the database: the row still drops the badge
    services.host_maintenance_enter(host=host, user=operator, reason="new PSU", until=until)
    assert "new PSU" in row_of(page(client), host)
    time_machine.move_to(until + dt.timedelta(minutes=1))
    assert "maintenance-badge" not in row_of(page(client), host)


def test_a_changed_host_key_and_a_disabled_host_show_at_once(client, viewer):
    host = f.make_host()
    f.make_snapshot(host)
    client.force_login(viewer)
    assert "status-host_key_mismatch" not in row_of(page(client), host)
    Host.objects.filter(pk=host.pk).update(host_key_status=HostKeyStatus.CHANGED)
    assert "status-host_key_mismatch" in row_of(page(client), host)
    Host.objects.filter(pk=host.pk).update(enabled=False)
    assert ">disabled<" in row_of(page(client), host)


def test_the_clocks_move_while_the_row_is_kept(client, viewer, time_machine):
    host = f.make_host()
    time_machine.move_to(timezone.now(), tick=False)
    f.make_snapshot(host, age=10)
    Host.objects.filter(pk=host.pk).update(last_probe_at=timezone.now() - dt.timedelta(seconds=10))
    client.force_login(viewer)
    row = row_of(page(client), host)
    assert 'data-age="10"' in row and "age fresh" in row and "in 50 s" in row
    time_machine.shift(dt.timedelta(seconds=400))
    row = row_of(page(client), host)
    assert 'data-age="410"' in row and "age stale" in row and ">overdue<" in row


def test_no_one_gets_anothers_button_or_token(client, teams, scoped, viewer, operator, rows_cache):
    """tess may probe team-a's hosts only; vera may probe nothing; otto everything. Whoever
    comes first fills the cache: each sees their own buttons, each with their own token."""
    tess = scoped("tess", "operator", "team-a")
    gpu = teams.hosts
    tokens = {}
    for user in (tess, viewer, operator, tess):
        client.force_login(user)
        body = page(client)
        own = re.search(r'"X-CSRFToken": "([^"]+)"', body)[1]
        assert set(TOKEN.findall(body)) <= {own}
        tokens[user.username] = own
        shown = {name: h for name, h in gpu.items() if f'data-host="{name}"' in body}
        buttons = {name for name, h in shown.items() if "Probe now" in row_of(body, h)}
        if user == tess:
            assert buttons == {"gpu-02", "gpu-03"} == set(shown)
        elif user == viewer:
            fleet = body[body.index('<table id="fleet"') : body.index("</table>")]
            assert buttons == set() and "csrfmiddlewaretoken" not in fleet
        else:
            assert buttons == {"gpu-01", "gpu-02", "gpu-03"}
        client.logout()
    assert len(set(tokens.values())) == 3
    # what is kept holds no token, no name of a person, and the button only as a hole
    for html in kept(rows_cache):
        assert "csrfmiddlewaretoken" not in html
        assert not any(token in html for token in tokens.values())
        assert not any(name in html for name in ("tess", "vera", "otto"))


def test_a_change_of_groups_or_roles_shows_at_once(client, teams, scoped, viewer):
    tess = scoped("tess", "operator", "team-a")
    gpu = teams.hosts
    client.force_login(tess)
    page(client)  # the cache is warm
    host_group_leave(hosts=[gpu["gpu-03"]], name="team-a")
    host_group_join(hosts=[gpu["gpu-01"]], name="team-a")
    for url in (reverse("hosts:dashboard"), reverse("hosts:dashboard_rows")):
        body = page(client, url)
        assert 'data-host="gpu-03"' not in body
        assert "Probe now" in row_of(body, gpu["gpu-01"])
    client.force_login(viewer)
    assert "Probe now" not in page(client)
    viewer.groups.add(ensure_role_groups()[OPERATOR])
    body = page(client)
    assert all("Probe now" in row_of(body, h) for h in gpu.values())


def test_a_probing_row_polls_for_its_probe_and_hides_the_button(client, operator, viewer):
    host = f.make_host()
    snapshot = f.make_snapshot(host)
    client.force_login(operator)
    page(client)  # the row is kept without polling
    headers = {"HX-Request": "true"}
    status = reverse("hosts:probe_status", args=[host.name])
    row = client.get(f"{status}?view=row&after={snapshot.pk}", headers=headers).content.decode()
    assert f'hx-get="{status}?view=row&amp;after={snapshot.pk}"' in row
    assert "probing…" in row and "Probe now" not in row
    row = row_of(page(client), host)
    assert "data-probing" not in row and "Probe now" in row
    client.force_login(viewer)  # who may not probe sees neither
    row = client.get(f"{status}?view=row&after={snapshot.pk}", headers=headers).content.decode()
    assert "data-probing" in row and "probing…" not in row and "Probe now" not in row


def test_text_a_host_reports_cannot_open_a_hole(client, operator):
    """A reason or model name is the host's text: one shaped like a hole is printed, not
    filled (a hole's mark carries a tag derived from SECRET_KEY)."""
    host = f.make_host()
    f.make_snapshot(host)
    forged = "\x1dabcdef0123456789:probe\x1dX\x1dabcdef0123456789:/probe\x1d \x1eaa:csrf:\x1e"
    judge(host, "failed", [{"level": "failed", "text": forged}])
    client.force_login(operator)
    row = row_of(page(client), host)
    assert forged in row
    assert len(TOKEN.findall(row)) == 1


def test_the_counts_above_the_table(client, teams, scoped, operator):
    """Each verdict's count, hosts never judged among the unknown, and those in maintenance:
    of the hosts the person sees only."""
    gpu = teams.hosts
    judge(gpu["gpu-01"], "failed")
    judge(gpu["gpu-02"], "healthy")  # gpu-03 never judged
    services.host_maintenance_enter(
        host=gpu["gpu-01"], user=operator, reason="reseating GPU 3",
        until=timezone.now() + dt.timedelta(hours=1),
    )  # fmt: skip
    client.force_login(operator)
    body = page(client)
    assert ">1 failed<" in body and ">1 healthy<" in body and ">1 unknown<" in body
    assert ">1 in maintenance<" in body and ">0 degraded<" in body
    client.force_login(scoped("tess", "viewer", "team-a"))
    body = page(client)
    assert ">0 failed<" in body and ">1 healthy<" in body and ">1 unknown<" in body
    assert ">0 in maintenance<" in body
