"""Host groups from the command line: `add_host --group` and `host_group`, audited as the
command line (system:cli), one event per host that joins or leaves; and the demo's groups."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from controlplane.accounts.models import HostGroup
from controlplane.audit.models import AuditEvent
from hosts.models import Host
from hosts.scope import hosts_visible
from tests import factories as f

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def groups_of(name: str) -> list[str]:
    return sorted(Host.objects.get(name=name).groups.values_list("name", flat=True))


def test_add_host_puts_the_host_in_its_groups_making_unknown_ones(db: None) -> None:
    HostGroup.objects.create(name="prod")
    said = run("add_host", "gpu-cli", "--address", "127.0.0.1", "--group", "prod",
               "--group", "h100", "--group", "prod")  # fmt: skip
    assert "In host groups: h100, prod." in said
    assert groups_of("gpu-cli") == ["h100", "prod"]
    joined = AuditEvent.objects.filter(action="hostgroup.hosts_changed", host_label="gpu-cli")
    assert sorted(e.data["group"] for e in joined) == ["h100", "prod"]
    assert {e.actor for e in joined} == {"system:cli"}


def test_add_host_refuses_a_group_name_that_cannot_be_one(db: None) -> None:
    with pytest.raises(CommandError, match="--group: A host group's name"):
        run("add_host", "gpu-cli", "--address", "127.0.0.1", "--group", "Not A Name")
    assert not Host.objects.filter(name="gpu-cli").exists()  # nothing half done


def test_host_group_puts_existing_hosts_in_a_group_and_takes_them_out(db: None) -> None:
    for name in ("gpu-01", "gpu-02"):
        f.make_host(name, port=1)
    said = run("host_group", "team-a", "gpu-01", "gpu-02", "--description", "Team A")
    assert "team-a holds 2: gpu-01, gpu-02." in said
    assert HostGroup.objects.get(name="team-a").description == "Team A"
    run("host_group", "team-a", "gpu-02", "--remove")
    assert groups_of("gpu-01") == ["team-a"] and groups_of("gpu-02") == []
    with pytest.raises(CommandError, match="no such host: gpu-99"):
        run("host_group", "team-a", "gpu-01", "gpu-99")
    with pytest.raises(CommandError, match="no host group named 'nope'"):
        run("host_group", "nope", "gpu-01", "--remove")


def test_the_demo_puts_its_hosts_in_groups_and_scopes_tess_to_team_a(db: None) -> None:
    run("demo_users")  # before the fleet is registered: the groups, empty
    for name in ("gpu-01", "gpu-02", "gpu-03", "gpu-04"):
        f.make_host(name, port=1)
    said = run("demo_users")  # once it is: its hosts join them
    assert "tess" in said and "operator of team-a only" in said
    assert groups_of("gpu-02") == ["prod", "team-a"]
    tess = User.objects.get(username="tess")
    assert sorted(hosts_visible(tess).values_list("name", flat=True)) == [
        "gpu-02", "gpu-03", "gpu-04"
    ]  # fmt: skip
    assert not tess.groups.exists()  # no role everywhere
