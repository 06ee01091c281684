"""A probe round's specs read each host's last state from what this process stored last
(hosts.services.probe_spec.seen_states) when that snapshot is still the host's newest readable
one, and from the database otherwise: either way the same state."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from hosts import services
from hosts.models import Host, StateSnapshot
from hosts.services.probe_spec import last_seen_state, last_seen_states_prefetch, seen_states
from tests import factories as f
from tests.fleet import RegisteredFleet

pytestmark = pytest.mark.django_db


def fresh(hosts: list[Host]) -> list[Host]:
    return [Host.objects.select_related("credential").get(pk=h.pk) for h in hosts]


def read_back(host: Host) -> object:
    plain = Host.objects.get(pk=host.pk)  # not prefetched: read from the database
    return last_seen_state(plain)


def test_the_next_round_reads_the_states_this_process_stored(
    registered_fleet: RegisteredFleet,
) -> None:
    hosts = fresh(registered_fleet.hosts)
    services.hosts_probe(hosts=hosts, trigger="schedule", integrity=False)
    again = fresh(hosts)
    with CaptureQueriesContext(connection) as queries:
        last_seen_states_prefetch(again)
    assert len(queries) == 1  # the newest ids only: no snapshot's JSON read back
    for host in again:
        held = last_seen_state(host)
        assert held is not None and held.deployments
        assert held.deployments == read_back(host).deployments


def test_a_newer_snapshot_stored_elsewhere_is_read_from_the_database(
    registered_fleet: RegisteredFleet,
) -> None:
    hosts = fresh(registered_fleet.hosts)
    services.hosts_probe(hosts=hosts, trigger="schedule", integrity=False)
    # another process (a change job's worker) stored a newer snapshot of the first host
    elsewhere = f.make_snapshot(hosts[0], age=0, parsed={"deployments": {}, "gpus": []})
    again = fresh(hosts)
    with CaptureQueriesContext(connection) as queries:
        last_seen_states_prefetch(again)
    assert len(queries) == 2
    assert last_seen_state(again[0]).deployments == {}
    assert StateSnapshot.objects.get(pk=elsewhere.pk).state().deployments == {}
    assert last_seen_state(again[1]).deployments  # still this process's own


def test_the_states_kept_are_bounded() -> None:
    host = f.make_host("gpu-01")
    snapshot = f.make_snapshot(host)
    snapshot.state_known(snapshot.parsed, snapshot.state())
    bounded = type(seen_states)(max_hosts=0)
    bounded.keep([snapshot])
    assert bounded.get(host.pk, (snapshot.pk, snapshot.digest)) is None
    roomy = type(seen_states)(max_hosts=1)
    roomy.keep([snapshot])
    assert roomy.get(host.pk, (snapshot.pk, snapshot.digest)) is not None
    # another snapshot (or one with the same id after a rollback): not this state
    assert roomy.get(host.pk, (snapshot.pk + 1, snapshot.digest)) is None
    assert roomy.get(host.pk, (snapshot.pk, "0" * 64)) is None


def test_a_snapshot_holds_its_state_only_once_read_and_only_for_its_own_json() -> None:
    host = f.make_host("gpu-01")
    stored = StateSnapshot.objects.get(pk=f.make_snapshot(host).pk)
    assert stored.state_in_hand() is None  # not read yet: keeping it would cost a parse
    state = stored.state()
    assert stored.state_in_hand() is state
    stored.parsed = dict(stored.parsed)  # another JSON: the state read is not its state
    assert stored.state_in_hand() is None
