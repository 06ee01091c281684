"""Running a change job's commands on a host whose key is pinned."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings

from .. import commands, engine_commands, probe_sections
from ..choices import HostKeyStatus
from ..models import Host
from ..parsers.api_keys import unit_api_key
from ..parsers.sections import split_sections
from ..ssh import CommandResult, SSHFailure, ssh_loop
from .probing import probe_spec_for, ssh_target_for

# --- commands for change jobs --------------------------------------------------------------------


def host_run(
    *,
    host: Host,
    argv: list[str],
    stdin: str | None = None,
    timeout: float | None = None,
    heartbeat: Callable[[], None] | None = None,
    heartbeat_every: float = 10.0,
) -> CommandResult:
    """Run one command built by hosts.commands on a host whose key is pinned.

    Raises SSHFailure when the host cannot be reached or is not trusted; a non-zero exit is a
    normal result for the caller to judge. `heartbeat` is called every `heartbeat_every`
    seconds while the command runs; if it raises, the command is cancelled.
    """
    fresh = Host.objects.select_related("credential").get(pk=host.pk)
    if fresh.host_key_status != HostKeyStatus.PINNED:
        raise SSHFailure("host_key_mismatch", "the host key is not pinned; commands are blocked")
    target = ssh_target_for(fresh)
    if target is None:
        raise SSHFailure("error", "no SSH credential")
    return ssh_loop.call(
        ssh_loop.pool.run(
            target,
            command_line_for(fresh, argv),
            connect_timeout=settings.SSH_CONNECT_TIMEOUT,
            command_timeout=timeout or settings.SSH_COMMAND_TIMEOUT,
            stdin=stdin,
            read_only=False,
        ),
        heartbeat=heartbeat,
        every=heartbeat_every,
    )


# Commands that change the host and so run under `sudo -n` when the host asks for it; and the
# engine's own pip reinstalling its package (the engine's Python runs the benchmark client too,
# which needs no root, so pip is told apart by its arguments, not its program).
SUDO_COMMANDS = {"systemctl", "tee", "journalctl"}


def needs_root(argv: list[str]) -> bool:
    return argv[0] in SUDO_COMMANDS or engine_commands.is_pip_install(argv)


def command_line_for(host: Host, argv: list[str]) -> str:
    """The exact line sent to the host for `argv` (with `sudo -n` where the host needs it)."""
    full = commands.with_sudo(argv, host.use_sudo) if needs_root(argv) else argv
    return commands.render(full)


def host_api_key(
    *, host: Host, unit: str, on_command: Callable[[str], None] | None = None
) -> str | None:
    """The API key `unit`'s server takes, read on the host now from where its unit gets it
    (hosts.parsers.api_keys), or None when it takes none. For the requests of one change job:
    the caller holds it in memory only and sends it on stdin, never on a command line; the key
    is never stored, logged or audited. `on_command` is told the command line before it is
    sent (a job's step records it: the command is audited, its output is not). Raises
    SSHFailure like host_run."""
    fresh = Host.objects.select_related("credential").get(pk=host.pk)
    if fresh.host_key_status != HostKeyStatus.PINNED:
        raise SSHFailure("host_key_mismatch", "the host key is not pinned; commands are blocked")
    target = ssh_target_for(fresh)
    spec = probe_spec_for(fresh, integrity=False)
    server = next((s for s in spec.servers if s.unit == unit), None)
    if target is None or server is None:
        return None
    script = probe_sections.api_key_sources_script(server, sudo=spec.sudo)
    if on_command is not None:
        on_command(script)
    result = ssh_loop.call(
        ssh_loop.pool.run(
            target,
            script,
            connect_timeout=settings.SSH_CONNECT_TIMEOUT,
            command_timeout=settings.SSH_COMMAND_TIMEOUT,
        )
    )
    sections = split_sections(result.stdout + result.stderr)
    cat = sections.get(probe_sections.UNIT_CAT.name(unit))
    files = {
        path: found.output
        for path in server.environment_files
        if (found := sections.get(probe_sections.ENV_FILE.name(unit, path))) is not None
    }
    return unit_api_key(cat.output, files) if cat is not None else None
