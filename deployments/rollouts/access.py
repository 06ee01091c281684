"""Who may do what with a rollout, host by host: the one place the pages, the API and the
services ask. A rollout reaches many hosts, so each role must hold on every one of them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from controlplane.accounts.roles import APPROVER, OPERATOR, has_role
from controlplane.refusals import Refused
from hosts.models import Host
from hosts.scope import user_has_role_on_host, user_sees_host

from .models import Rollout


class RolloutRefused(Refused):
    """A rule refused something asked of a rollout (code: forbidden, conflict, invalid, stale,
    not_found)."""


def hosts_without_role(user: Any, role: str, hosts: Iterable[Host]) -> list[Host]:
    return [host for host in hosts if not user_has_role_on_host(user, role, host)]


def rollout_visible(*, user: Any, rollout: Rollout) -> bool:
    """A rollout is shown only to someone who sees every host it names: listing it would
    otherwise say that a host outside their groups exists."""
    return all(user_sees_host(user, rh.host) for rh in rollout.hosts.select_related("host"))


def require_role_on_hosts(user: Any, role: str, hosts: Iterable[Host], action: str) -> None:
    """`role` on every host, or a refusal naming the hosts where it does not hold."""
    if not has_role(user, role):
        raise RolloutRefused(f"{action} needs the {role} role", code="forbidden")
    missing = hosts_without_role(user, role, hosts)
    if missing:
        names = ", ".join(host.name for host in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise RolloutRefused(
            f"{action} needs the {role} role on every host of the rollout; you do not hold it "
            f"on {names}{more}",
            code="forbidden",
        )


def _hosts(rollout: Rollout) -> list[Host]:
    return [rh.host for rh in rollout.hosts.select_related("host")]


def rollout_request_allowed(*, user: Any) -> None:
    """The first gate of a request, before its input is read (the hosts are checked after)."""
    if not has_role(user, OPERATOR):
        raise RolloutRefused("Requesting a rollout needs the operator role", code="forbidden")


def rollout_decide_allowed(*, user: Any, rollout: Rollout | None = None) -> None:
    """Approving or rejecting: the approver role on every host of the rollout."""
    if rollout is None:
        if not has_role(user, APPROVER):
            raise RolloutRefused("Deciding on a rollout needs the approver role", code="forbidden")
        return
    require_role_on_hosts(user, APPROVER, _hosts(rollout), "Deciding on a rollout")


def rollout_control_allowed(*, user: Any, rollout: Rollout | None = None) -> None:
    """Pausing, resuming and aborting: its requester (still an operator of every host), or an
    approver of every host. Without a rollout, only whether the user could be either."""
    if rollout is None:
        if not (has_role(user, OPERATOR) or has_role(user, APPROVER)):
            raise RolloutRefused(
                "Pausing, resuming or aborting a rollout needs the operator or approver role",
                code="forbidden",
            )
        return
    hosts = _hosts(rollout)
    is_requester = rollout.requested_by_id is not None and rollout.requested_by_id == getattr(
        user, "pk", None
    )
    if is_requester and not hosts_without_role(user, OPERATOR, hosts):
        return
    if has_role(user, APPROVER) and not hosts_without_role(user, APPROVER, hosts):
        return
    raise RolloutRefused(
        "only the rollout's requester, or an approver of every host it names, may pause, "
        "resume or abort it",
        code="forbidden",
    )
