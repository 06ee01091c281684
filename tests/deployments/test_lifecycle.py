"""A change's lifecycle, as a table: every move the table allows works, with its audit event in
the same transaction; every other move is refused; a lost race writes nothing; and no other
module writes a change's status."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from controlplane.audit.models import AuditEvent
from deployments import lifecycle
from deployments.choices import FINAL_STATUSES, ChangeStatus
from deployments.models import ChangeRequest
from tests import factories as f

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {
    ("pending_approval", "queued"),
    ("pending_approval", "rejected"),
    ("pending_approval", "cancelled"),
    ("pending_approval", "drifted"),
    ("queued", "running"),
    ("queued", "cancelled"),
    ("queued", "drifted"),
    ("running", "succeeded"),
    ("running", "failed"),
    ("running", "rolled_back"),
    ("running", "drifted"),
    ("running", "cancelled"),
    ("running", "interrupted"),
}
PAIRS = list(itertools.product(ChangeStatus.values, repeat=2))


def test_the_table_is_exactly_the_documented_lifecycle() -> None:
    assert {(s, t) for s, t in PAIRS if lifecycle.allowed(s, t)} == ALLOWED
    assert all(not lifecycle.TRANSITIONS[final] for final in FINAL_STATUSES)


@pytest.fixture
def change(db):
    catalog = f.make_catalog()
    deployment = f.make_deployment(f.make_host("gpu-01"), catalog["NVFP4"])
    snapshot = f.make_snapshot(deployment.host)
    return ChangeRequest.objects.create(
        host=deployment.host, deployment=deployment, kind="restart", snapshot=snapshot,
        reason="r", requested_by_name="otto", needs_approval=False, params_digest="-",
        correlation_id="c-1", status=ChangeStatus.CANCELLED,
    )  # fmt: skip


@pytest.mark.parametrize(("source", "target"), PAIRS)
def test_each_move(change, source, target) -> None:
    ChangeRequest.objects.filter(pk=change.pk).update(status=source)
    change.status = source
    if (source, target) not in ALLOWED:
        with pytest.raises(lifecycle.IllegalTransition):
            lifecycle.change_transition(
                change=change, source=source, target=target, action="change.test"
            )
        assert ChangeRequest.objects.get(pk=change.pk).status == source
        return
    moved = lifecycle.change_transition(
        change=change, source=source, target=target, reason="because", action="change.test"
    )
    assert moved
    row = ChangeRequest.objects.get(pk=change.pk)
    assert row.status == target == change.status
    event = AuditEvent.objects.get(action="change.test")
    assert event.correlation_id == "c-1" and event.target_id == str(change.pk)
    if target in FINAL_STATUSES:
        assert row.finished_at is not None and row.status_reason == "because"
    if target == ChangeStatus.RUNNING:
        assert row.started_at is not None


def test_a_lost_race_writes_nothing(change) -> None:
    ChangeRequest.objects.filter(pk=change.pk).update(status=ChangeStatus.QUEUED)
    first = ChangeRequest.objects.get(pk=change.pk)
    second = ChangeRequest.objects.get(pk=change.pk)
    assert lifecycle.change_transition(
        change=first, source="queued", target="running", action="change.started"
    )
    assert not lifecycle.change_transition(
        change=second, source="queued", target="cancelled", action="change.cancelled"
    )
    assert ChangeRequest.objects.get(pk=change.pk).status == ChangeStatus.RUNNING
    assert not AuditEvent.objects.filter(action="change.cancelled").exists()


def _status_writes(path: Path) -> list[str]:
    """Lines that set a status to a ChangeStatus value: `x.status = ChangeStatus...` or
    `.update(status=ChangeStatus...)` / `.create(status=...)`."""

    def is_change_status(node: ast.AST) -> bool:
        return any(
            isinstance(n, ast.Name) and n.id in {"ChangeStatus", "S"} for n in ast.walk(node)
        )

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == "status"
                    and is_change_status(node.value)
                ):
                    found.append(f"{path.name}:{node.lineno}")
        writes = {"update", "create", "bulk_create", "get_or_create", "update_or_create"}
        if isinstance(node, ast.Call) and (
            (isinstance(node.func, ast.Attribute) and node.func.attr in writes)
            or (isinstance(node.func, ast.Name) and node.func.id == "ChangeRequest")
        ):
            for keyword in node.keywords:
                if keyword.arg == "status" and is_change_status(keyword.value):
                    found.append(f"{path.name}:{node.lineno}")
    return found


def test_nothing_but_the_lifecycle_writes_a_change_status() -> None:
    product = [
        p for d in ("deployments", "controlplane", "hosts") for p in (ROOT / d).rglob("*.py")
    ]
    writers = [
        line
        for path in product
        if "migrations" not in path.parts and path.name != "lifecycle.py"
        for line in _status_writes(path)
    ]
    assert writers == []
