"""verify_audit: exit 0 with the count and head hash, or exit 1 naming the first broken
sequence number and why. Tampering is done as someone with database access would do it:
triggers switched off, rows edited, removed or re-hashed, the head row moved."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import CommandError, call_command

from controlplane.audit import checkpoints, services, tasks
from controlplane.audit.models import AuditChainHead, AuditEvent, AuditVerification
from controlplane.audit.verification import chain_verify

from .conftest import (
    cut_newest,
    make_events,
    recompute_chain_from,
    require_postgresql,
    rewrite_event,
    tamper,
)


def verify_command(*args: str) -> tuple[int, str]:
    """Run verify_audit as the shell would see it: (exit status, output)."""
    out = io.StringIO()
    try:
        call_command("verify_audit", *args, stdout=out, stderr=out)
    except CommandError as exc:
        return exc.returncode, str(exc)
    return 0, out.getvalue()


def _cp_file(checkpoint_dir: Path) -> Path:
    return checkpoint_dir / "checkpoints.jsonl"


def test_an_intact_log_verifies(db: None) -> None:
    make_events(12)
    services.checkpoint_write()
    make_events(3)
    head = AuditChainHead.objects.get(pk=1)
    status, out = verify_command()
    assert status == 0
    assert "OK 15 events" in out and head.hash in out
    assert "1 checkpoints, last checkpoint #12" in out


def test_an_empty_log_verifies(db: None) -> None:
    status, out = verify_command()
    assert status == 0 and "OK 0 events" in out


def test_an_edited_event_is_named(db: None) -> None:
    make_events(10)
    rewrite_event(6, recompute=False, actor="mallory")
    status, message = verify_command()
    assert status == 1
    assert "broken at seq 6 (hash_mismatch)" in message


def test_edited_data_is_named(db: None) -> None:
    make_events(10)
    rewrite_event(4, recompute=False, data={"i": 3, "ok": False})
    assert chain_verify().broken_seq == 4


@pytest.mark.parametrize(
    "column,value", [("created_at", "2020-01-01 00:00:00"), ("ip", "10.9.9.9")]
)
def test_every_column_is_covered(db: None, column: str, value: str) -> None:
    make_events(5)
    tamper(f"UPDATE audit_auditevent SET {column} = %s WHERE seq = 2", [value])
    result = chain_verify()
    assert (result.ok, result.broken_seq, result.problem) == (False, 2, "hash_mismatch")


def test_a_replaced_event_breaks_the_next_link(db: None) -> None:
    make_events(10)
    rewrite_event(6, recompute=True, actor="mallory")
    result = chain_verify()
    assert (result.broken_seq, result.problem) == (7, "broken_link")


def test_a_deleted_event_is_named(db: None) -> None:
    make_events(10)
    tamper("DELETE FROM audit_auditevent WHERE seq = 4")
    status, message = verify_command()
    assert status == 1
    assert "broken at seq 4 (gap)" in message


def test_cutting_off_the_newest_events_shows_against_the_head_row(db: None) -> None:
    make_events(10)
    tamper("DELETE FROM audit_auditevent WHERE seq > 7")
    result = chain_verify()
    assert (result.broken_seq, result.problem) == (8, "gap")
    assert "events #8..#10 are missing" in result.reason


def test_cutting_off_the_newest_events_shows_against_the_last_checkpoint(db: None) -> None:
    make_events(8)
    services.checkpoint_write()
    make_events(2)
    services.checkpoint_write()
    cut_newest(keep=6)  # the head row is moved too: the chain alone looks perfect
    status, message = verify_command()
    assert status == 1
    assert "broken at seq 7 (missing_after_checkpoint)" in message
    assert "events #7..#10 are missing" in message


def test_a_recomputed_chain_shows_against_a_checkpoint(db: None) -> None:
    make_events(10)
    services.checkpoint_write()
    make_events(5)
    recompute_chain_from(4, actor="mallory")
    assert chain_verify(checkpoint_path=Path("/nonexistent/none.jsonl")).ok  # chain alone: fine
    result = chain_verify()
    assert (result.broken_seq, result.problem) == (10, "checkpoint_mismatch")


def test_a_forged_checkpoint_is_caught_by_its_signature(db: None, checkpoint_dir: Path) -> None:
    make_events(5)
    services.checkpoint_write()
    make_events(3)
    services.checkpoint_write()
    path = _cp_file(checkpoint_dir)
    lines = path.read_text().splitlines()
    forged = json.loads(lines[-1])
    forged["seq"] = 5
    forged["hash"] = AuditEvent.objects.get(seq=5).hash
    path.write_text("\n".join([*lines[:-1], json.dumps(forged)]) + "\n")
    status, message = verify_command()
    assert status == 1
    assert "(checkpoint_signature)" in message and "signature invalid" in message


@pytest.mark.parametrize("claim_trusted_key_id", [False, True])
def test_a_checkpoint_re_signed_with_another_key_is_caught(
    db: None, checkpoint_dir: Path, claim_trusted_key_id: bool
) -> None:
    make_events(5)
    services.checkpoint_write()
    path = _cp_file(checkpoint_dir)
    (line,) = [json.loads(x) for x in path.read_text().splitlines()]
    other = Ed25519PrivateKey.generate()
    if not claim_trusted_key_id:
        line["key_id"] = checkpoints.key_id(other.public_key())
    line["seq"], line["hash"] = 3, AuditEvent.objects.get(seq=3).hash
    body = {k: v for k, v in line.items() if k != "signature"}
    line["signature"] = checkpoints.sign(body, other)
    path.write_text(json.dumps(line) + "\n")
    result = chain_verify()
    assert (result.ok, result.problem, result.broken_seq) == (False, "checkpoint_signature", 3)


def test_a_removed_checkpoint_breaks_the_checkpoint_chain(db: None, checkpoint_dir: Path) -> None:
    for _ in range(3):
        make_events(2)
        services.checkpoint_write()
    path = _cp_file(checkpoint_dir)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[2]]) + "\n")
    result = chain_verify()
    assert (result.problem, result.broken_seq) == ("checkpoint_link", 6)


def test_an_unreadable_checkpoint_line_fails_verification(db: None, checkpoint_dir: Path) -> None:
    make_events(2)
    services.checkpoint_write()
    with _cp_file(checkpoint_dir).open("a") as f:
        f.write('{"seq": 3, "hash"\n')
    result = chain_verify()
    assert (result.ok, result.problem) == (False, "checkpoint_unreadable")


def test_a_head_row_that_disagrees_with_the_last_event_is_caught(db: None) -> None:
    make_events(4)
    AuditChainHead.objects.filter(pk=1).update(hash="e" * 64)
    result = chain_verify()
    assert (result.problem, result.broken_seq) == ("head_mismatch", 4)


def test_verification_can_use_a_copy_of_the_checkpoints(
    db: None, checkpoint_dir: Path, tmp_path: Path
) -> None:
    make_events(6)
    services.checkpoint_write()
    copy = tmp_path / "elsewhere.jsonl"
    copy.write_bytes(_cp_file(checkpoint_dir).read_bytes())
    _cp_file(checkpoint_dir).unlink()
    cut_newest(keep=2)
    assert verify_command()[0] == 0  # no local checkpoints: the cut is invisible
    status, message = verify_command("--checkpoints", str(copy))
    assert status == 1 and "broken at seq 3" in message


def test_results_are_kept_for_the_history_page(db: None) -> None:
    make_events(3)
    body = tasks.verify_chain()
    assert body["ok"] and body["events"] == 3
    tamper("DELETE FROM audit_auditevent WHERE seq = 2")
    verify_command()
    verify_command("--no-record")
    latest, first = AuditVerification.objects.order_by("-id")[:2]
    assert (first.ok, first.trigger, first.events) == (True, "beat", 3)
    assert (latest.ok, latest.trigger, latest.broken_seq, latest.problem) == (
        False,
        "cli",
        2,
        "gap",
    )
    assert AuditVerification.objects.count() == 2


# --- several processes on PostgreSQL ---------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "damage,expected",
    [
        (None, None),
        (lambda: rewrite_event(3, recompute=False, actor="x"), (3, "hash_mismatch")),
        (lambda: rewrite_event(8, recompute=False, actor="x"), (8, "hash_mismatch")),
        (lambda: rewrite_event(5, recompute=True, actor="x"), (6, "broken_link")),
        (lambda: tamper("DELETE FROM audit_auditevent WHERE seq = 6"), (6, "gap")),
        (lambda: tamper("DELETE FROM audit_auditevent WHERE seq = 5"), (5, "gap")),
        (lambda: tamper("DELETE FROM audit_auditevent WHERE seq IN (3, 8)"), (3, "gap")),
    ],
)
def test_parallel_walks_find_what_a_single_walk_finds(damage: Any, expected: Any) -> None:
    require_postgresql()
    make_events(10)
    if damage:
        damage()
    single = chain_verify(workers=1)
    parallel = chain_verify(workers=2)  # seq 1..5 and 6..10, in two forked processes
    assert (parallel.ok, parallel.broken_seq, parallel.problem, parallel.events) == (
        single.ok,
        single.broken_seq,
        single.problem,
        single.events,
    )
    if expected is None:
        assert parallel.ok and parallel.events == 10
    else:
        assert (parallel.broken_seq, parallel.problem) == expected


@pytest.mark.django_db(transaction=True)
def test_parallel_walks_check_checkpoints_in_every_range() -> None:
    require_postgresql()
    make_events(3)
    services.checkpoint_write()
    make_events(7)
    services.checkpoint_write()
    recompute_chain_from(2, actor="mallory")
    result = chain_verify(workers=2)
    assert (result.broken_seq, result.problem) == (3, "checkpoint_mismatch")


def test_the_signing_key_setting_is_base64_of_32_bytes(settings: Any) -> None:
    assert len(base64.b64decode(settings.AUDIT_SIGNING_KEY)) == 32
