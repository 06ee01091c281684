"""The docs' table of change kinds (docs/reference/change-kinds.md) is deployments.kinds, row
for row: a kind added, or a declaration changed, fails here until the table says so."""

from __future__ import annotations

import re
from pathlib import Path

from deployments.kinds import KINDS, KindSpec

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "change-kinds.md"


def yes(flag: bool) -> str:
    return "yes" if flag else "no"


def row(spec: KindSpec) -> list[str]:
    if not spec.writes_revision:
        writes = "no"
    elif spec.new_revision:
        writes = "a new revision"
    else:
        writes = "an earlier revision"
    return [
        f"`{spec.kind.value}`",
        spec.systemctl,
        writes,
        yes(spec.serves),
        yes(spec.takes_model),
        yes(spec.shapes),
        yes(spec.partial_snapshot_ok),
        yes(spec.may_drain),
        yes(spec.always_approved),
    ]


def test_the_docs_table_is_the_declaration() -> None:
    lines = re.findall(r"^\| `[a-z_]+` \|.*\|$", PAGE.read_text(), flags=re.M)
    documented = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    assert documented == [row(spec) for spec in KINDS.values()]
