"""Checkpoints anchor the chain head outside the database: signed, linked to each other,
appended to a file, and refused when they would bless a shortened or rewritten log."""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import CommandError, call_command

from controlplane.audit import checkpoints, services, tasks
from controlplane.audit.chain import canonical_json
from controlplane.audit.checkpoints import CheckpointRefused
from controlplane.audit.models import AuditChainHead

from .conftest import cut_newest, make_events


def _lines(checkpoint_dir: Path) -> list[dict[str, Any]]:
    text = (checkpoint_dir / "checkpoints.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_it_signs_the_head_into_a_file_outside_the_database(db: None, checkpoint_dir: Path) -> None:
    make_events(3)
    written = services.checkpoint_write(now=dt.datetime(2026, 6, 1, 8, 0, tzinfo=dt.UTC))
    assert written is not None
    head = AuditChainHead.objects.get(pk=1)
    (line,) = _lines(checkpoint_dir)
    assert line["seq"] == head.seq == 3
    assert line["hash"] == head.hash
    assert line["time"] == "2026-06-01T08:00:00+00:00"
    assert line["prev_signature"] == ""
    public = checkpoints.signing_key().public_key()
    assert line["key_id"] == checkpoints.key_id(public)
    body = {k: v for k, v in line.items() if k != "signature"}
    public.verify(base64.b64decode(line["signature"]), canonical_json(body).encode())


def test_each_checkpoint_carries_the_previous_signature(db: None, checkpoint_dir: Path) -> None:
    make_events(1)
    services.checkpoint_write()
    make_events(2)
    services.checkpoint_write()
    first, second = _lines(checkpoint_dir)
    assert second["prev_signature"] == first["signature"]
    assert (first["seq"], second["seq"]) == (1, 3)


def test_an_unchanged_head_is_not_signed_again(db: None, checkpoint_dir: Path) -> None:
    make_events(2)
    assert services.checkpoint_write() is not None
    assert services.checkpoint_write() is None
    assert len(_lines(checkpoint_dir)) == 1


def test_an_empty_log_has_nothing_to_sign(db: None, checkpoint_dir: Path) -> None:
    assert services.checkpoint_write() is None
    assert not (checkpoint_dir / "checkpoints.jsonl").exists()


def test_it_refuses_to_sign_a_log_shorter_than_its_last_checkpoint(
    db: None, checkpoint_dir: Path
) -> None:
    make_events(5)
    services.checkpoint_write()
    cut_newest(keep=3)
    with pytest.raises(CheckpointRefused, match="contradicts the last checkpoint"):
        services.checkpoint_write()
    with pytest.raises(CommandError) as exc:
        call_command("audit_checkpoint", stdout=io.StringIO())
    assert exc.value.returncode == 1
    assert len(_lines(checkpoint_dir)) == 1


def test_it_refuses_to_sign_a_rewritten_head(db: None, checkpoint_dir: Path) -> None:
    make_events(2)
    services.checkpoint_write()
    AuditChainHead.objects.filter(pk=1).update(hash="f" * 64)
    with pytest.raises(CheckpointRefused):
        services.checkpoint_write()


def test_the_beat_task_and_the_command_write_checkpoints(db: None, checkpoint_dir: Path) -> None:
    make_events(2)
    body = tasks.write_checkpoint()
    assert body is not None and body["seq"] == 2
    assert tasks.write_checkpoint() is None
    make_events(1)
    out = io.StringIO()
    call_command("audit_checkpoint", stdout=out)
    assert "Checkpoint #3" in out.getvalue()
    assert [line["seq"] for line in _lines(checkpoint_dir)] == [2, 3]


def test_the_public_key_can_be_printed_for_verifiers(db: None) -> None:
    out = io.StringIO()
    call_command("verify_audit", "--public-key", stdout=out)
    public = checkpoints.signing_key().public_key()
    assert checkpoints.public_key_text(public) in out.getvalue()
    assert checkpoints.key_id(public) in out.getvalue()


def test_a_rotated_key_keeps_old_checkpoints_valid_when_trusted(db: None, settings: Any) -> None:
    make_events(1)
    services.checkpoint_write()
    old_public = checkpoints.public_key_text(checkpoints.signing_key().public_key())
    settings.AUDIT_SIGNING_KEY = base64.b64encode(bytes(range(32))).decode()
    make_events(1)
    services.checkpoint_write()
    found = checkpoints.load()
    with pytest.raises(checkpoints.CheckpointProblem, match="unknown key"):
        checkpoints.check(found, checkpoints.trusted_keys())
    settings.AUDIT_TRUSTED_PUBLIC_KEYS = [old_public]
    checkpoints.check(found, checkpoints.trusted_keys())


def test_a_bad_signing_key_is_a_configuration_error(db: None, settings: Any) -> None:
    from django.core.exceptions import ImproperlyConfigured

    settings.AUDIT_SIGNING_KEY = base64.b64encode(b"too short").decode()
    with pytest.raises(ImproperlyConfigured):
        checkpoints.signing_key()


def test_signatures_do_not_verify_with_another_key() -> None:
    body = {"v": 1, "seq": 1, "hash": "a" * 64, "time": "t", "prev_signature": "", "key_id": "k"}
    other = Ed25519PrivateKey.generate()
    cp = checkpoints.Checkpoint(
        seq=1, hash="a" * 64, time="t", prev_signature="", key_id="k",
        signature=checkpoints.sign(body, other),
    )  # fmt: skip
    assert checkpoints.signature_valid(cp, {"k": other.public_key()})
    assert not checkpoints.signature_valid(cp, {"k": Ed25519PrivateKey.generate().public_key()})
