"""Templates stay readable and say what they mean: no line of 300 characters or more (wrap it
inside a tag), and no `{# ... #}` over several lines, which Django prints as text (use
{% comment %})."""

from __future__ import annotations

from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
LIMIT = 300
PAGES = sorted(TEMPLATES.rglob("*.html"))


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_no_line_is_300_characters_or_longer(path: Path) -> None:
    long = [n for n, line in enumerate(path.read_text().splitlines(), 1) if len(line) >= LIMIT]
    assert not long, f"{path.relative_to(TEMPLATES)}: lines {long} are {LIMIT}+ characters"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_no_one_line_comment_spans_lines(path: Path) -> None:
    open_comments = [
        n for n, line in enumerate(path.read_text().splitlines(), 1)
        if line.count("{#") > line.count("#}")
    ]  # fmt: skip
    assert not open_comments, f"{path.relative_to(TEMPLATES)}: {{# #}} over lines {open_comments}"
