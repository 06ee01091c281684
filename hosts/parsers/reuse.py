"""What a host's previous probe made of each section, for the sections that did not change.

Most of a warm probe prints what the host's last probe printed: the unit files, the models,
the topology, the driver's version, a `/metrics` page with no traffic. `SectionMemo` is what one
probe read: for each section and each way of reading it, the section's digest (SHA-256 of its
output and exit status) and what the reading gave, problems included. The next probe of the same
host reads a section again only when its digest differs; otherwise it takes the earlier result.
The readers are pure functions of the section (and of the key they name), so a result reused is
the result a new reading would give: tests/hosts/test_probe_reuse.py holds every probe to a
fresh parse of the same output.

What is reused is shared with the earlier probe's state, so nothing may change it in place: the
readers that combine two sections (a process's unit, a GPU's remapped rows, a link's counters)
build new objects (hosts.parsers.probe, hosts.parsers.probe_gpu).

A memo holds only what its own probe read, so it is bounded by the probe's sections;
`SectionMemos` keeps one per host, for the hosts a worker probes, at most `max_hosts` of them
(about 26 KB a host of eight PCIe GPUs, 68 KB one of eight NVLink GPUs: bench/README.md).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from ..state import Problem
from .common import Section

T = TypeVar("T")

# (the digest of what was read, what reading it gave, the problems it added)
_Entry = tuple[bytes, Any, tuple[Problem, ...]]


def section_digest(section: Section) -> bytes:
    """What decides whether a section is the same as before: its output and exit status."""
    digest = hashlib.sha256(section.output.encode("utf-8", "surrogatepass"))
    digest.update(b"\0%d" % (-1 if section.exit_status is None else section.exit_status))
    return digest.digest()


class SectionMemo:
    """What one probe of one host read, each entry reused from `previous` when its section's
    digest is the same."""

    def __init__(self, previous: SectionMemo | None = None) -> None:
        self._previous: dict[Hashable, _Entry] = previous.entries if previous else {}
        self.entries: dict[Hashable, _Entry] = {}
        self._digests: dict[str, bytes] = {}
        self.reused = 0
        self.read = 0

    def done(self) -> None:
        """The probe is parsed: let go of what the previous one read."""
        self._previous = {}
        self._digests = {}

    def digest(self, section: Section) -> bytes:
        found = self._digests.get(section.name)
        if found is None:
            found = self._digests[section.name] = section_digest(section)
        return found

    def lookup(self, key: Hashable, section: Section) -> tuple[bool, Any, tuple[Problem, ...]]:
        """(found, value, problems) of `key` in the previous probe, if read from the same text.
        A hit is carried into this probe's memo."""
        digest = self.digest(section)
        entry = self._previous.get(key)
        if entry is None or entry[0] != digest:
            return False, None, ()
        self.entries[key] = entry
        self.reused += 1
        return True, entry[1], entry[2]

    def store(self, key: Hashable, section: Section, value: Any, problems: list[Problem]) -> None:
        self.entries[key] = (self.digest(section), value, tuple(problems))
        self.read += 1

    def redacted(self, section: Section, redact: Callable[[str], str]) -> str:
        """`redact(section.output)`, or the earlier probe's redaction of the same output."""
        key = ("redacted", section.name, redact)
        found, value, _ = self.lookup(key, section)
        if found:
            # None: redacting changed nothing, so the output itself is not kept twice
            return section.output if value is None else str(value)
        output = redact(section.output)
        self.store(key, section, None if output == section.output else output, [])
        return output


class SectionMemos:
    """The last probe's memo of each host a worker process probes, by host key: at most
    `max_hosts`, and none for a host not probed for `forget_idle`'s seconds (another worker
    took it over). Thread-safe.

    When full, a host not yet kept is not kept (its probes read every section) rather than
    pushing out another: hosts are probed round after round in turn, and with more of them
    than fit, dropping the least recently probed would drop each one just before its next
    probe, so that none was ever reused."""

    def __init__(self, max_hosts: int) -> None:
        self.max_hosts = max_hosts
        self._memos: dict[Hashable, tuple[float, SectionMemo]] = {}
        self._lock = threading.Lock()

    def begin(self, host: Hashable) -> SectionMemo:
        """A memo for a new probe of `host`, reading from its last one."""
        with self._lock:
            found = self._memos.get(host)
        return SectionMemo(found[1] if found else None)

    def keep(self, host: Hashable, memo: SectionMemo) -> None:
        """`memo` as the one the next probe of `host` reads from."""
        memo.done()
        with self._lock:
            if host in self._memos or len(self._memos) < self.max_hosts:
                self._memos[host] = (time.monotonic(), memo)

    def forget(self, host: Hashable) -> None:
        with self._lock:
            self._memos.pop(host, None)

    def forget_idle(self, max_idle: float) -> int:
        """Drop the memos of hosts not probed for `max_idle` seconds; how many went."""
        cutoff = time.monotonic() - max_idle
        with self._lock:
            idle = [host for host, (used, _) in self._memos.items() if used < cutoff]
            for host in idle:
                del self._memos[host]
        return len(idle)

    def clear(self) -> None:
        with self._lock:
            self._memos.clear()

    def __len__(self) -> int:
        return len(self._memos)
