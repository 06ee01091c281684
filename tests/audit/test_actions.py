"""Every audit action is a member of one class, so renaming one cannot silently break a webhook
or a saved filter."""

from __future__ import annotations

import ast
from pathlib import Path

from controlplane.audit.actions import AuditAction
from controlplane.audit.tracking import TRACKED
from controlplane.notifications.events import NOTIFYING_ACTIONS

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("controlplane", "hosts", "deployments")


def _literal_actions(path: Path) -> list[str]:
    """`action="x.y"` keywords and `{"action": "x.y"}` entries written as plain strings."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.keyword)
            and node.arg == "action"
            and isinstance(node.value, ast.Constant | ast.JoinedStr)
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.value.lineno}")
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value == "action"
                    and isinstance(value, ast.Constant | ast.JoinedStr)
                ):
                    found.append(f"{path.relative_to(ROOT)}:{value.lineno}")
    return found


def test_the_product_writes_actions_only_as_members_of_the_class() -> None:
    files = [p for d in PRODUCT for p in (ROOT / d).rglob("*.py") if "migrations" not in p.parts]
    # argparse's action="store_true" is not an audit action (commands, and the scripts sent to
    # hosts, which are text to the product and record nothing)
    exempt = {"management", "host_scripts"}
    literals = [
        hit for path in files if not exempt & set(path.parts) for hit in _literal_actions(path)
    ]
    assert literals == []


def test_every_tracked_model_and_job_outcome_has_its_actions() -> None:
    for label in TRACKED:
        kind = label.split(".")[1]
        for verb in ("created", "changed", "deleted"):
            assert AuditAction.tracked(kind, verb).value == f"{kind}.{verb}"
    for status in ("succeeded", "failed", "rolled_back", "drifted", "cancelled", "interrupted"):
        assert AuditAction.change_ended(status).value == f"change.{status}"


def test_notifications_listen_only_to_actions_that_exist() -> None:
    assert set(AuditAction.values) >= NOTIFYING_ACTIONS
