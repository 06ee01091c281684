"""`journalctl -u <unit> -n <N> --no-pager -o short-iso`: the newest lines, bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

from hosts.parsers import ParseError, parse_journal
from hosts.parsers.journal import ELLIPSIS

SAMPLES = Path(__file__).parent / "samples"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def test_a_failing_units_journal_of_systemd_255() -> None:
    lines = parse_journal(sample("journal_short_iso.txt"), lines=50, max_bytes=16384)

    assert len(lines) == 8
    assert lines[0].startswith("2025-11-04T11:02:01+00:00 gpu-prod-01 vllm[2391177]: ")
    assert "CUDA out of memory" in lines[2]
    assert lines[-1].endswith("Started vllm-kimi-k25.service - vLLM Kimi-K2.5 NVFP4.")


def test_older_systemd_stamps_and_boot_markers() -> None:
    lines = parse_journal(sample("journal_short_iso_systemd252.txt"), lines=50, max_bytes=16384)

    assert lines[0] == "-- Boot 5d2c0a1e8f3b4c7d9e6f1a2b3c4d5e6f --"
    assert lines[1].startswith("2024-03-11T08:00:13+0000 ")


def test_no_entries_is_an_empty_journal() -> None:
    assert parse_journal("-- No entries --\n", lines=10, max_bytes=100) == []
    assert parse_journal("", lines=10, max_bytes=100) == []


def test_a_user_who_may_not_read_the_journal_is_told_so() -> None:
    with pytest.raises(ParseError, match="systemd-journal"):
        parse_journal(sample("journal_no_permission.txt"), lines=10, max_bytes=100)


@pytest.mark.parametrize(
    "text",
    [
        "journalctl: unrecognized option '--bogus'\n",
        "Failed to add filter for units: No data available\n",
        "Nov 04 11:02:01 gpu-prod-01 vllm[1]: the short format, not short-iso\n",
    ],
)
def test_what_is_not_short_iso_raises(text: str) -> None:
    with pytest.raises(ParseError):
        parse_journal(text, lines=10, max_bytes=100)


def test_the_newest_lines_are_kept_within_the_line_bound() -> None:
    text = sample("journal_short_iso.txt")

    lines = parse_journal(text, lines=3, max_bytes=16384)

    assert lines == text.splitlines()[-3:]


def test_the_newest_lines_are_kept_within_the_byte_bound() -> None:
    text = sample("journal_short_iso.txt")
    every = text.splitlines()
    budget = sum(len(line.encode()) + 1 for line in every[-2:])

    assert parse_journal(text, lines=50, max_bytes=budget) == every[-2:]
    assert parse_journal(text, lines=50, max_bytes=budget - 1) == every[-1:]


def test_a_newest_line_longer_than_the_budget_is_cut_not_dropped() -> None:
    text = "2025-11-04T11:02:01+00:00 host vllm[1]: " + "é" * 500 + "\n"

    (line,) = parse_journal(text, lines=5, max_bytes=64)

    assert line.endswith(ELLIPSIS) and len(line.encode()) + 1 <= 64
    assert line.startswith("2025-11-04T11:02:01+00:00 host vllm[1]: é")


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        (
            "2026-12-01T10:00:00+00:00 gpu-01 vllm[1]: HF_TOKEN=hf_abcdef123 rejected",
            "hf_abcdef123",
        ),
        ("2026-12-01T10:00:00+00:00 gpu-01 vllm[1]: serve --api-key sk-live-42 ...", "sk-live-42"),
        (
            "2026-12-01T10:00:00+00:00 gpu-01 vllm[1]: non-default args: {'api_key': ['sk-9']}",
            "sk-9",
        ),
    ],
)
def test_journal_lines_never_keep_a_secret(line: str, secret: str) -> None:
    (kept,) = parse_journal(line + "\n", lines=10, max_bytes=4096)
    assert secret not in kept and "<redacted>" in kept


def test_privileged_reads_run_under_sudo_on_hosts_that_ask() -> None:
    from hosts.commands import ProbeSpec, ServerSpec
    from hosts.probe_sections import probe_sections

    server = ServerSpec("vllm-a.service", 8000, environment_files=("/etc/vllm/a.env",),
                        journal_lines=20)  # fmt: skip
    sections = dict(probe_sections(ProbeSpec(servers=(server,), sudo=True)))
    assert sections["envfile:vllm-a.service:/etc/vllm/a.env"][:3] == ["sudo", "-n", "cat"]
    assert sections["journal:vllm-a.service"][:3] == ["sudo", "-n", "journalctl"]
    assert sections["unit:vllm-a.service"][0] == "systemctl"  # read-only and open: no sudo


def test_the_probes_own_requests_are_left_out_and_everything_else_kept() -> None:
    """vLLM 0.32 logs every request through uvicorn (tests/real_engine/captures/journal.json):
    three lines a probe, which would be most of a quiet server's tail."""
    stamp = "2026-12-02T07:00:0{}+00:00 gpu-01 vllm[4100]: (APIServer pid=4100) "
    text = "\n".join(
        stamp.format(i) + line
        for i, line in enumerate(
            [
                'INFO:     127.0.0.1:51514 - "GET /health HTTP/1.1" 200 OK',
                'INFO:     127.0.0.1:51516 - "GET /v1/models HTTP/1.1" 401 Unauthorized',
                'INFO:     127.0.0.1:51518 - "GET /metrics HTTP/1.1" 200 OK',
                'INFO:     10.0.3.7:40112 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
                'INFO:     127.0.0.1:51520 - "POST /v1/completions HTTP/1.1" 200 OK',
                'INFO:     10.0.3.7:40114 - "GET /health HTTP/1.1" 200 OK',
                "ERROR [core.py:842] EngineCore encountered a fatal error.",
            ]
        )
    )
    lines = parse_journal(text, lines=50, max_bytes=16384)
    assert [line.split(") ", 1)[1] for line in lines] == [
        'INFO:     10.0.3.7:40112 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        'INFO:     127.0.0.1:51520 - "POST /v1/completions HTTP/1.1" 200 OK',
        'INFO:     10.0.3.7:40114 - "GET /health HTTP/1.1" 200 OK',
        "ERROR [core.py:842] EngineCore encountered a fatal error.",
    ]
