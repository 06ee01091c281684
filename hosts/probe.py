"""One probe: run the read-only script over SSH, parse what came back, classify the outcome.

Pure of Django: takes targets and specs, returns `ProbeOutcome`s. Storing them is the job of
hosts.services.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from . import commands, probe_sections
from .parsers import ProbeParse
from .parsers.api_keys import unit_api_key
from .parsers.common import Section
from .parsers.http import parse_http
from .parsers.probe import parse_sections
from .parsers.reuse import SectionMemos
from .parsers.sections import split_sections
from .ssh import ConnectionPool, SSHFailure, SSHTarget, gather_limited
from .state import HostState, snapshot_digest

MAX_SECTION_CHARS = 64 * 1024  # /metrics can be large; keep what a person needs to read
# What each host's last probe read (hosts.parsers.reuse), for the hosts this process probes:
# 26-68 KB a host, so at most 0.3-0.7 GB; one worker keeps at most about 7,400 hosts at a 60 s
# interval (bench/README.md), and a host not probed for SSH_IDLE_SECONDS is forgotten with its
# connection (hosts.services.probing), so a worker's share of a fleet of 20,000 fits.
MEMO_MAX_HOSTS = 10_000
section_memos = SectionMemos(MEMO_MAX_HOSTS)


@dataclass
class ProbeOutcome:
    status: str
    duration_ms: int
    parsed: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    presented_key: str = ""
    reused_connection: bool = False
    # The typed state `parsed` is the JSON of, when the probe parsed one: the recorder hands it
    # to the stored snapshot rather than reading `parsed` back (about 1 ms a probe). Shared
    # with the host's section memo, so it must be read, never changed.
    state: HostState | None = field(default=None, compare=False, repr=False)

    @property
    def digest(self) -> str:
        return snapshot_digest(self.parsed)


def _raw_sections(parse: ProbeParse) -> dict[str, Any]:
    """Each section's output as the parse returned it (secrets already redacted), capped."""
    raw: dict[str, Any] = {}
    for name, section in parse.sections.items():
        output = section.output
        raw[name] = {
            "output": output[:MAX_SECTION_CHARS],
            "exit_status": section.exit_status,
            "truncated": section.truncated or len(output) > MAX_SECTION_CHARS,
        }
    return raw


async def probe(
    pool: ConnectionPool,
    target: SSHTarget,
    spec: commands.ProbeSpec,
    *,
    connect_timeout: float,
    command_timeout: float,
) -> ProbeOutcome:
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        script = probe_sections.probe_script(spec)
    except commands.UnsafeCommand as exc:  # a row that bypassed validation: send nothing
        return ProbeOutcome(status="error", duration_ms=elapsed(), error=str(exc))
    try:
        result = await pool.run(
            target,
            script,
            connect_timeout=connect_timeout,
            command_timeout=command_timeout,
        )
    except SSHFailure as failure:
        return ProbeOutcome(
            status=failure.kind,
            duration_ms=elapsed(),
            error=failure.message,
            presented_key=failure.presented_key,
        )
    output = result.stdout + result.stderr
    sections = split_sections(output)
    again = await _with_api_keys(
        pool,
        target,
        spec,
        sections,
        connect_timeout=connect_timeout,
        command_timeout=command_timeout,
    )
    if again:  # framed as the script frames it: the later section replaces the first
        sections = split_sections(output + again)
    units = [server.unit for server in spec.servers]
    checked = [s.unit for s in spec.servers if spec.integrity and s.engine_python]
    # The parse redacts secrets in the sections it returns; raw output is stored only from
    # those, never from `result` itself. The host's previous probe's memo spares reading again
    # what did not change since (hosts.parsers.reuse).
    memo = section_memos.begin(target.pool_key)
    parse = parse_sections(
        sections,
        units,
        integrity=checked,
        environment_files={s.unit: s.environment_files for s in spec.servers},
        journal_lines={s.unit: s.journal_lines for s in spec.servers},
        gpu_diagnostic=spec.gpu_diagnostic,
        memo=memo,
    )
    section_memos.keep(target.pool_key, memo)
    parsed = parse.state.to_json()
    problems = parse.state.problems
    return ProbeOutcome(
        status="partial" if problems else "ok",
        duration_ms=elapsed(),
        parsed=parsed,
        raw=_raw_sections(parse),
        error="; ".join(f"{p.section}: {p.message}" for p in problems),
        reused_connection=result.reused_connection,
        state=parse.state,
    )


async def _with_api_keys(
    pool: ConnectionPool,
    target: SSHTarget,
    spec: commands.ProbeSpec,
    sections: dict[str, Section],
    *,
    connect_timeout: float,
    command_timeout: float,
) -> str:
    """`/v1/models` again, with the unit's own API key, for each server that answered 401:
    framed as the script frames it, so this later section replaces the first. The key is read
    from the unit and its environment files in `output` (api_keys.unit_api_key), sent on curl's
    stdin, and forgotten; a server whose key is not found keeps its 401, which the parse records
    as a problem."""
    again = ""
    for server in spec.servers:
        name = probe_sections.MODELS.name(server.unit)
        first = sections.get(name)
        if first is None or parse_http(first.output).status != 401:
            continue
        cat = sections.get(probe_sections.UNIT_CAT.name(server.unit))
        files = {
            path: found.output
            for path in server.environment_files
            if (found := sections.get(probe_sections.ENV_FILE.name(server.unit, path))) is not None
        }
        key = unit_api_key(cat.output, files) if cat is not None else None
        if key is None:
            continue
        try:
            config = commands.curl_auth_config(key)
            fetched = await pool.run(
                target,
                commands.join(commands.http_get(server.port, "/v1/models", config_on_stdin=True))
                + " 2>&1",
                stdin=config,
                connect_timeout=connect_timeout,
                command_timeout=command_timeout,
            )
        except (commands.UnsafeCommand, SSHFailure):
            continue  # the first answer stands
        status = fetched.exit_status if fetched.exit_status is not None else 255
        again += commands.frame(name, fetched.stdout + fetched.stderr, status)
    return again


async def probe_many(
    pool: ConnectionPool,
    jobs: list[tuple[SSHTarget, commands.ProbeSpec]],
    *,
    concurrency: int,
    connect_timeout: float,
    command_timeout: float,
) -> list[ProbeOutcome]:
    return await gather_limited(
        (
            probe(
                pool, target, spec, connect_timeout=connect_timeout, command_timeout=command_timeout
            )
            for target, spec in jobs
        ),
        concurrency,
    )
