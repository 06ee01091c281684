"""README.md is the quick start and points into docs/. `make docs-check` checks every link of the
docs site (mkdocs build --strict); the README is not part of the site, so its links are checked
here: each relative link or image names a file or folder of the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def relative_targets(text: str) -> list[str]:
    targets = [m.group(1) for m in LINK.finditer(text)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t) and t[0] != "#"]


def test_every_relative_link_of_the_readme_names_a_file() -> None:
    targets = relative_targets((ROOT / "README.md").read_text())
    assert targets, "the README links into docs/"
    missing = [t for t in targets if not (ROOT / t.split("#", 1)[0]).exists()]
    assert missing == []


def test_a_broken_link_is_caught() -> None:
    text = (
        "[ok](docs/index.md) ![shot](tests/browser/screenshots/01-dashboard.png) "
        "[gone](docs/nope.md) [web](https://example.com) [here](#two-commands)"
    )
    targets = relative_targets(text)
    assert [t for t in targets if not (ROOT / t).exists()] == ["docs/nope.md"]
