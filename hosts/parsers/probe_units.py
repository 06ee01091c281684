"""A unit's probe beyond `systemctl show`: its files, its environment files, its journal; and
the redaction of every section that may hold a secret before anything keeps it."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

from controlplane.redaction import redact_text

from .. import probe_sections as catalog
from ..commands import JOURNAL_MAX_BYTES, UnsafeCommand, check_path
from ..state import EnvironmentFile, UnitFile, UnitState
from .collector import Collector
from .common import Section
from .envfiles import parse_environment_file, redact_environment_text
from .journal import parse_journal
from .reuse import SectionMemo
from .systemd import parse_sha256sum
from .unit_files import environment_file_names, parse_systemctl_cat, redact_unit_text

_MISSING = "No such file or directory"
_NO_FILES = "No files found for "


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def redact_sections(
    sections: dict[str, Section], memo: SectionMemo | None = None
) -> dict[str, Section]:
    """Every section as it may be stored: environment files and unit files read as systemd
    reads them, with the values of secret-looking keys replaced, whether or not they parsed (a
    cut-short one too); every other section that may carry free text (the journal, the
    server's answers, the integrity check, anything added later) through
    controlplane.redaction."""
    redacted = {}
    for name, section in sections.items():
        if name.startswith(catalog.ENV_FILE.prefix + ":"):
            redact = redact_environment_text
        elif name.startswith(catalog.UNIT_CAT.prefix + ":"):
            redact = redact_unit_text
        elif catalog.stored_verbatim(name):
            redacted[name] = section
            continue
        else:
            redact = redact_text
        # an output the host printed last time too was redacted then (hosts.parsers.reuse)
        output = redact(section.output) if memo is None else memo.redacted(section, redact)
        if output != section.output:
            section = dataclasses.replace(section, output=output)
        redacted[name] = section
    return redacted


def parse_unit_files(
    out: Collector, unit: str, state: UnitState, fragment_sha256: str | None
) -> list[UnitFile]:
    """The unit's files from `systemctl cat`, split where `systemctl show` says they are.

    Texts are redacted; hashes are of the files as printed, except the fragment's, which is
    sha256sum's of the real bytes when it names the same file.
    """
    section = out.take(catalog.UNIT_CAT.name(unit))
    if section is None:
        return []
    fragment = state.fragment_path
    expected = (fragment, *state.drop_in_paths) if fragment else None
    # the same output, the same paths and the same fragment hash: the same files
    found: list[UnitFile] = out.reuse(
        section,
        (parse_unit_files, fragment, expected, fragment_sha256),
        lambda: _unit_files(out, section, fragment, expected, fragment_sha256),
    )
    return list(found)


def _unit_files(
    out: Collector,
    section: Section,
    fragment: str | None,
    expected: tuple[str, ...] | None,
    fragment_sha256: str | None,
) -> list[UnitFile]:
    before = len(out.problems)
    paths = list(expected) if expected is not None else None
    files = out.attempt(section.name, lambda: parse_systemctl_cat(section.output, paths))
    if files == [] and section.output.strip().startswith(_NO_FILES):
        return []  # the unit does not exist: systemctl says so and exits 1
    out.check_exit(section, "systemctl cat", before)
    parsed = [UnitFile(path, redact_unit_text(text), _sha256(text)) for path, text in files or []]
    if parsed and fragment_sha256 and parsed[0].path == fragment:
        parsed[0].sha256 = fragment_sha256
    return parsed


def named_environment_files(state: UnitState, files: Sequence[UnitFile]) -> dict[str, bool]:
    """The environment files the unit names, path -> optional: those systemd loaded (`show`)
    and those the files on disk name (they differ until a daemon-reload), in that order."""
    named: dict[str, bool] = {}
    for name in [*state.environment_files, *environment_file_names([f.text for f in files])]:
        path = name.removeprefix("-")
        named[path] = named.get(path, False) or name.startswith("-")
    return named


def parse_environment_files(
    out: Collector,
    unit: str,
    state: UnitState,
    files: Sequence[UnitFile],
    requested: Sequence[str],
) -> list[EnvironmentFile]:
    """Each environment file the unit names, as its `envhash:` and `envfile:` sections say.

    Every requested section is looked at, so a missing or cut one is a problem even when the
    unit's own sections were lost too; a requested file the unit no longer names is left out.
    A named file the probe did not read (the spec came from an older snapshot, or its path is
    one the control plane does not send) is a problem: the snapshot did not see all the unit
    runs with, so it cannot back a change until a probe has read it.
    """
    named = named_environment_files(state, files)
    read: dict[str, EnvironmentFile] = {}
    for path in dict.fromkeys(requested):
        hashed = out.take(catalog.ENV_HASH.name(unit, path))
        section = out.take(catalog.ENV_FILE.name(unit, path))
        if path in named:
            read[path] = _environment_file(out, path, named[path], hashed, section)
    result = []
    for path, optional in named.items():
        if path not in read:
            out.add(catalog.ENV_FILE.name(unit, path), _unread_reason(path))
        result.append(read.get(path) or EnvironmentFile(path=path, optional=optional))
    return result


def _unread_reason(path: str) -> str:
    try:
        check_path(path)
    except UnsafeCommand:
        return (
            "named by EnvironmentFile= but not read: only paths of letters, digits and "
            ". _ + - are read"
        )
    return "named by EnvironmentFile= but not read by this probe (the next probe reads it)"


def _environment_file(
    out: Collector, path: str, optional: bool, hashed: Section | None, section: Section | None
) -> EnvironmentFile:
    """A file whose hash or contents were not read whole is left empty (its problem is already
    there), so a snapshot never pairs a hash with contents it did not see."""
    entry = EnvironmentFile(path=path, optional=optional)
    if hashed is None or section is None:
        return entry
    before = len(out.problems)
    entry.sha256 = out.attempt(hashed.name, lambda: parse_sha256sum(hashed.output))
    entry.missing = entry.sha256 is None and len(out.problems) == before
    # Anything quoted in a problem comes from the redacted text.
    shown = dataclasses.replace(section, output=redact_environment_text(section.output))
    if section.exit_status == 0:
        entry.variables, problems = parse_environment_file(section.output)
        for message in problems:
            out.add(section.name, message)
    elif not (entry.missing and _MISSING in section.output):
        out.check_exit(shown, "cat", len(out.problems))
    return entry


def parse_journal_section(out: Collector, unit: str, lines: int) -> list[str] | None:
    """The unit's newest journal lines, when the probe asked for them (None otherwise)."""
    if lines <= 0:
        return None
    section = out.take(catalog.JOURNAL.name(unit))
    if section is None:
        return None
    before = len(out.problems)
    tail: list[str] | None = out.attempt(
        section.name,
        lambda: parse_journal(section.output, lines=lines, max_bytes=JOURNAL_MAX_BYTES),
    )
    out.check_exit(section, "journalctl", before)
    return tail
