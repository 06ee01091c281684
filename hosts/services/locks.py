"""The hosts' rows, locked first: one lock order for every writer, so none deadlocks with another.

A writer that changes hosts' rows (a probe round, maintenance, a host key, a verdict through its
trigger, a rollout request, a change job's end) locks them here, by id, before the audit chain's
head (`controlplane.audit.services.chain_lock`) and before any other row.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..models import Host


def hosts_rows_lock(host_ids: Iterable[int]) -> None:
    """Lock the hosts' rows until the caller's transaction ends, in id order."""
    list(
        Host.objects.select_for_update(of=("self",))
        .filter(pk__in=list(host_ids))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
