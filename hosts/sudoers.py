"""The sudoers entry a host needs: what the control plane runs under `sudo -n`, and no more.

Lines with exact arguments (reading an environment file, the engine repair's pip) are made by
the builders that make the commands, so the two cannot drift apart; lines whose arguments vary
(`systemctl show`, the journal) end in sudo's `*`. Simulated hosts enforce the entry, and
tests/security/test_sudoers.py runs a whole flow against it: a command sent under sudo that
the entry does not allow fails the tests until it is added here (and to docs/operations/hosts.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from . import commands, engine_commands
from .models import Host
from .selectors import latest_integrity_snapshot
from .services.probe_spec import environment_paths, last_seen_state

SUDOERS_PATH = "/etc/sudoers.d/controlplane"
# The units the control plane may act on. sudo's `*` also matches spaces: see
# docs/operations/hosts.md.
UNIT_PATTERN = "vllm-*.service"
# Where sudo's secure_path finds the programs the control plane names without a path (Debian
# and Ubuntu); sudoers names programs by their full path.
BIN_DIR = "/usr/bin"

# What docs/operations/hosts.md shows: the demo fleet's environment file and a deployment's
# default engine.
EXAMPLE_USER = "deploy"
EXAMPLE_ENVIRONMENT_FILES = ("/etc/vllm/kimi-k25.env",)
EXAMPLE_ENGINE_PYTHON = "/opt/vllm/.venv/bin/python3"
EXAMPLE_ENGINE_VERSION = "0.11.2"

_UNIT_ACTIONS = ("start", "stop", "restart")  # what hosts.commands.unit_action sends
_USER_RE = r"[a-z_][a-z0-9_.-]{0,31}"
# Characters sudoers reads as syntax inside a command's arguments unless escaped.
_ESCAPED = str.maketrans({c: "\\" + c for c in "\\,:=#"})
# Arguments that would widen a line (wildcards) or that sudo could not tell apart (spaces).
_UNSAYABLE = re.compile(r"[\s*?\[\]\"]")


@dataclass(frozen=True)
class EngineInstall:
    """An engine install that engine repair may reinstall: its Python, the distribution and
    exact version, and the wheel directory on the host ("" for the index pip is set up for)."""

    python: str
    version: str
    dist: str = "vllm"
    source: str = ""


EXAMPLE_ENGINES = (EngineInstall(python=EXAMPLE_ENGINE_PYTHON, version=EXAMPLE_ENGINE_VERSION),)


def _exact(argv: Sequence[str]) -> str:
    """One sudoers command allowing exactly `argv` (a bare program name as sudo finds it)."""
    program, *args = argv
    if any(_UNSAYABLE.search(a) for a in args):
        raise ValueError(f"cannot allow {argv!r} exactly in sudoers")
    path = program if program.startswith("/") else f"{BIN_DIR}/{program}"
    return " ".join([path, *(a.translate(_ESCAPED) for a in args)])


def sudoers_commands(
    *,
    units: Sequence[str] = (),
    environment_files: Iterable[str] = (),
    engines: Iterable[EngineInstall] = (),
) -> list[str]:
    """The commands the control plane runs as root, in sudoers syntax, one per item.

    With `units`, the lines that act on a unit name each one exactly; without, they name
    UNIT_PATTERN, whose `*` sudo also lets match `vllm-a.service sshd.service`."""
    names = [u.translate(_ESCAPED) for u in units] or [UNIT_PATTERN]
    lines = [
        *(
            f"{BIN_DIR}/systemctl {action} --no-block {unit}"
            for action in _UNIT_ACTIONS
            for unit in names
        ),
        f"{BIN_DIR}/systemctl daemon-reload",
        *(f"{BIN_DIR}/systemctl show {unit} *" for unit in names),
        *(f"{BIN_DIR}/tee -- {commands.UNIT_DIR}/{unit}" for unit in names),
        *(f"{BIN_DIR}/journalctl -u {unit} *" for unit in names),
        _exact(commands.kernel_xids()),
    ]
    for path in dict.fromkeys(environment_files):
        lines += [_exact(commands.file_read(path)), _exact(commands.file_hash(path))]
    for engine in dict.fromkeys(engines):
        argv = engine_commands.pip_reinstall(
            engine.python, engine.dist, engine.version, find_links=engine.source
        )
        lines.append(_exact(argv))
    return lines


def sudoers_entry(
    *,
    user: str,
    units: Sequence[str] = (),
    environment_files: Iterable[str] = (),
    engines: Iterable[EngineInstall] = (),
) -> str:
    """The whole /etc/sudoers.d/controlplane file for `user` (check it with `visudo -cf`)."""
    if not re.fullmatch(_USER_RE, user):
        raise ValueError(f"refusing user name {user!r}")
    lines = sudoers_commands(units=units, environment_files=environment_files, engines=engines)
    body = ", \\\n    ".join(lines)
    return (
        f"# {SUDOERS_PATH}: only what the control plane runs, only for vLLM units\n"
        f"{user} ALL=(root) NOPASSWD: \\\n    {body}\n"
    )


def example_entry(user: str = EXAMPLE_USER) -> str:
    """The docs' entry: the demo fleet's environment file, the default engine install."""
    return sudoers_entry(
        user=user, environment_files=EXAMPLE_ENVIRONMENT_FILES, engines=EXAMPLE_ENGINES
    )


def host_entry(*, host: Host, user: str = "", engine_version: str = "") -> tuple[str, list[str]]:
    """The entry for one registered host, and notes on what it had to leave out.

    Its units are named exactly (no `*` that sudo would let match a second unit). Environment
    files are the ones its units named in the newest snapshot; each deployment's
    engine is reinstalled at the version its newest integrity check found (or
    `engine_version`), from the deployment's wheel directory if it has one.
    """
    deployments = list(host.deployments.all())
    seen = last_seen_state(host)
    checked = latest_integrity_snapshot(host)
    found = checked.state().deployments if checked is not None else {}
    files: list[str] = []
    engines, notes = [], []
    for d in deployments:
        files += environment_paths(seen.deployments.get(d.unit) if seen is not None else None)
        report = found[d.unit].integrity if d.unit in found else None
        version = engine_version or (report.version if report is not None else None)
        if not version:
            notes.append(
                f"{d.unit}: no integrity check has found its {d.engine_dist} version yet, so "
                "engine repair is left out; probe with --integrity or pass --engine-version"
            )
            continue
        engines.append(
            EngineInstall(
                python=d.engine_python,
                version=version,
                dist=d.engine_dist,
                source=d.engine_package_source,
            )
        )
    if seen is None and deployments:
        notes.append("never probed: environment files are listed once a probe has read the units")
    text = sudoers_entry(
        user=user or host.username,
        units=sorted(d.unit for d in deployments),
        environment_files=files,
        engines=engines,
    )
    return text, notes
