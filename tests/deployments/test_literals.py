"""Statuses, verdicts and levels are members of their enums in the product, never string
literals (like audit actions, tests/audit/test_actions.py): a renamed or mistyped value then
fails at import or in mypy, instead of making a comparison silently false."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("controlplane", "hosts", "deployments")
# Attributes and names holding one of the product's own enums (hosts.choices, deployments.
# choices). A unit's active_state is systemd's word, not ours, and stays a string.
ENUM_NAMES = {"status", "verdict", "level", "key_status", "host_key_status"}


def _strings(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Set | ast.Tuple | ast.List) and node.elts:
        return all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
    return False


def _enum_valued(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr in ENUM_NAMES) or (
        isinstance(node, ast.Name) and node.id in ENUM_NAMES
    )


def literal_comparisons(source: str) -> list[int]:
    """Lines comparing an enum-valued name with a string, and Reason(...) given a level as a
    string."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            # `"key" in level` asks a dict named level for a key: not a comparison of values.
            membership = isinstance(node.ops[0], ast.In | ast.NotIn)
            valued = [node.left] if membership else sides
            if any(_enum_valued(s) for s in valued) and any(_strings(s) for s in sides):
                lines.append(node.lineno)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "Reason"
            and node.args
            and _strings(node.args[0])
        ):
            lines.append(node.lineno)
    return lines


def test_the_check_finds_what_it_is_for() -> None:
    found = literal_comparisons(
        'if snapshot.status in {"ok", "partial"}: pass\n'
        'if status == "pending_approval": pass\n'
        'Reason("failed", "x", "y")\n'
        "if snapshot.status == SnapshotStatus.OK: pass\n"
        'if unit.active_state == "active": pass\n'
        'if "error" in level: pass\n'
    )
    assert found == [1, 2, 3]


def test_the_product_compares_statuses_and_levels_only_with_enum_members() -> None:
    files = [p for d in PRODUCT for p in (ROOT / d).rglob("*.py") if "migrations" not in p.parts]
    hits = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in files
        for line in literal_comparisons(path.read_text())
    ]
    assert hits == []
