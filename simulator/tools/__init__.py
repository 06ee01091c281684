"""The programs a simulated host offers, printing what the real tools print for these flags.

The control plane's parsers are written against this output, so each formatter mirrors the real
program for the flags in hosts/commands.py exactly (separators, units, empty values, exit
statuses) and stays plausible for nearby flags an operator might try by hand.

One module per program (or family: `files` for cat, sha256sum and tee; `systemd` for what
systemctl and journalctl share); `interface` is what the shell and the tools exchange.
"""

from __future__ import annotations

from . import (
    basics,
    curl,
    dcgmi,
    files,
    journalctl,
    lb_drain,
    nvidia,
    ps,
    python,
    simctl,
    systemctl,
)
from .files import writable
from .interface import Context, Result, Tool
from .python import interpreters

COMMANDS: dict[str, Tool] = {
    "echo": basics.echo,
    "true": basics.true,
    ":": basics.true,
    "false": basics.false,
    "hostname": basics.hostname,
    "whoami": basics.whoami,
    "date": basics.date,
    "cat": files.cat,
    "sha256sum": files.sha256sum,
    "tee": files.tee,
    "systemctl": systemctl.systemctl,
    "journalctl": journalctl.journalctl,
    "nvidia-smi": nvidia.nvidia_smi,
    "dcgmi": dcgmi.dcgmi,
    "curl": curl.curl,
    "ps": ps.ps,
    "python3": python.python,
    "python": python.python,
    "simctl": simctl.simctl,
    "lb-drain": lb_drain.lb_drain,  # /usr/local/bin/lb-drain: the balancer's client
}


# The only programs that may read stdin (besides interpreters called by their full path).
_MAY_READ_STDIN = frozenset({"tee", "cat", "sha256sum", "curl", "python", "python3"})


def needs_stdin(name: str, argv: list[str]) -> bool:
    """Whether the program reads stdin (the client may never send EOF to one that does not)."""
    if name not in _MAY_READ_STDIN and "/" not in name:
        return False  # most commands: no need to ask each tool
    return (
        files.needs_stdin(name, argv)
        or python.needs_stdin(name, argv)
        or curl.needs_stdin(name, argv)
    )


def lookup(name: str) -> Tool | None:
    """The program a command runs: by name, or by full path one of the engine's interpreters."""
    return python.python if "/" in name else COMMANDS.get(name)


__all__ = [
    "COMMANDS",
    "Context",
    "Result",
    "Tool",
    "interpreters",
    "lookup",
    "needs_stdin",
    "writable",
]
