"""The engine integrity script's report (hosts/parsers/integrity.py)."""

from __future__ import annotations

import pytest

from hosts.parsers import (
    parse_integrity,
)
from hosts.state import (
    IntegrityReport,
)
from tests.hosts.parser_samples import (
    INTEGRITY_CLEAN,
    INTEGRITY_MODIFIED,
    INTEGRITY_TRACEBACK,
)


def test_integrity_clean() -> None:
    report = parse_integrity(INTEGRITY_CLEAN)

    assert report == IntegrityReport(dist="vllm", version="0.11.2", checked=1873)
    assert report.clean


def test_integrity_modified() -> None:
    report = parse_integrity(INTEGRITY_MODIFIED)

    assert report.modified == ["vllm/entrypoints/openai/api_server.py"]
    assert report.missing == ["vllm/_C.abi3.so"]
    assert report.added == ["vllm/sitecustomize.py"]
    assert not report.clean and report.error is None


def test_integrity_distribution_not_installed() -> None:
    report = parse_integrity('{"error": "distribution not installed", "dist": "vllm"}\n')

    assert report == IntegrityReport(dist="vllm", error="distribution not installed")


def test_integrity_after_warnings() -> None:
    text = "<string>:3: DeprecationWarning: something old\n" + INTEGRITY_CLEAN

    assert parse_integrity(text).checked == 1873


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            INTEGRITY_TRACEBACK,
            "PermissionError: [Errno 13] Permission denied: "
            "'/opt/vllm/lib/python3.12/site-packages/vllm/x.py'",
        ),
        (
            "bash: line 14: /opt/vllm/bin/python: No such file or directory\n",
            "bash: line 14: /opt/vllm/bin/python: No such file or directory",
        ),
        ("", "no output"),
        ('{"dist": "vllm", "version": "0.11.2", "checked": 18', '{"dist": "vllm", "version": '),
        ('{"dist": "vllm", "version": "0.11.2"}', "lacks dist, version or checked"),
        (
            '{"dist": "vllm", "version": "1", "checked": 1, "modified": "x"}',
            "'modified' is not a list",
        ),
        ('{"dist": "vllm", "version": "1", "checked": true}', "'checked' is not a count"),
    ],
)
def test_integrity_unreadable_output_is_a_report_with_an_error(text: str, error: str) -> None:
    report = parse_integrity(text)

    assert report.error is not None and error in report.error
    assert not report.clean
