"""Reading a unit's journal for a person ("show journal"): read-only, audited."""

from __future__ import annotations

from typing import Any

from controlplane.accounts.roles import VIEWER, has_role
from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction

from .. import commands
from ..models import Host
from ..parsers import ParseError, parse_journal
from ..ssh import SSHFailure
from .permissions import HostRefused, host_role_require
from .remote import host_run

DEFAULT_JOURNAL_LINES = 100


class JournalUnavailable(HostRefused):
    """The journal could not be read (host unreachable, journalctl refused)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="conflict")


def host_journal(
    *, host: Host, unit: str, lines: int = DEFAULT_JOURNAL_LINES, user: Any = None
) -> list[str]:
    """The newest `lines` journal lines of a unit deployed on `host`, oldest first, bounded to
    commands.JOURNAL_MAX_BYTES. Runs `journalctl -u <unit> -n <lines> --no-pager -o
    short-iso` over the host's pinned SSH connection (under `sudo -n` when the host uses sudo,
    which the documented sudoers entry allows). Read-only; every attempt is audited as
    `host.journal_read`, including the ones that fail.

    Whoever sees the host may read (`user` None: the system itself); a host outside the
    user's scope is not found. Only units deployed on the host can be read, so the button
    cannot become a reader of sshd's journal.
    """
    if user is not None:
        if not has_role(user, VIEWER):
            raise HostRefused("Reading a journal needs a role.", code="forbidden")
        host_role_require(user=user, host=host, roles=[VIEWER], doing="Reading a journal")
    if not host.deployments.filter(unit=unit).exists():
        raise HostRefused(f"{unit} is not deployed on {host.name}.", code="not_found")
    try:
        argv = commands.unit_journal_tail(unit, lines)
    except commands.UnsafeCommand as exc:
        raise HostRefused(str(exc), code="invalid") from exc
    data: dict[str, Any] = {"unit": unit, "lines": lines}
    try:
        result = host_run(host=host, argv=argv)
        output = result.stdout + result.stderr
        if result.exit_status not in (0, None) and not output.strip():
            raise ParseError(f"journalctl exited with status {result.exit_status}")
        tail = parse_journal(output, lines=lines, max_bytes=commands.JOURNAL_MAX_BYTES)
    except (SSHFailure, ParseError) as exc:
        data["error"] = str(exc)[:300]
        audit.record(
            action=AuditAction.HOST_JOURNAL_READ, actor=user, target=host, host=host, data=data
        )
        raise JournalUnavailable(f"Could not read the journal of {unit}: {exc}") from exc
    data["returned"] = len(tail)
    audit.record(
        action=AuditAction.HOST_JOURNAL_READ, actor=user, target=host, host=host, data=data
    )
    return tail
