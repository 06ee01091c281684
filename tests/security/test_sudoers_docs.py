"""The sudoers entry the docs show (docs/operations/hosts.md, "The sudoers entry") is the one
`manage.py sudoers_entry` prints and tests/security/test_sudoers.py runs every command against:
an entry changed in hosts.sudoers fails here until the page shows it."""

from __future__ import annotations

from pathlib import Path

from hosts import sudoers

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations" / "hosts.md"


def test_the_docs_show_the_entry_the_command_prints() -> None:
    section = PAGE.read_text().split("## The sudoers entry", 1)[1]
    shown = section.split("```\n", 1)[1].split("```", 1)[0]
    assert shown == sudoers.example_entry()
