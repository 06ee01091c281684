"""The stream's record (schema controlplane.audit/v1) and its syslog form: a receiver can verify
every record, the shipped JSON Schema describes every field, and RFC 5424's fields say what the
schema says."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema
import pytest

from controlplane.audit import services
from controlplane.audit.actions import AuditAction
from controlplane.audit.chain import HASHED_FIELDS
from controlplane.audit.streaming import delivery, records, syslog
from controlplane.canonical import canonical_json
from tests.audit.conftest import make_events

from .conftest import assert_continuous, destination

SCHEMA_FILE = (
    Path(__file__).resolve().parents[3]
    / "controlplane/audit/streaming/controlplane.audit.v1.schema.json"
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("postgresql")]


def _records() -> list[dict]:
    make_events(4)
    services.record(
        action=AuditAction.AUTH_LOGIN,
        actor="alice",
        data={"identity": {"issuer": "https://idp.example.net", "subject": "00u1"}},
    )
    return [records.record_from_row(r, redelivery=False) for r in delivery.rows_after(0, 100)]


def test_every_record_verifies_as_a_receiver_would() -> None:
    stream = _records()
    assert [r["seq"] for r in stream] == [1, 2, 3, 4, 5]
    assert assert_continuous(stream) == []
    # The receiver's rule spelled out with nothing but the standard library.
    for record in stream:
        hashed = {name: record[name] for name in HASHED_FIELDS}
        text = json.dumps(hashed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert hashlib.sha256(text.encode()).hexdigest() == record["hash"]


def test_records_match_the_shipped_json_schema_and_use_only_its_fields() -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    for record in _records():
        validator.validate(record)
        assert set(record) <= set(schema["properties"]), set(record) - set(schema["properties"])
    # The schema names every hashed field in `hash`'s description, in the hash's terms.
    described = schema["properties"]["hash"]["description"]
    assert ", ".join(HASHED_FIELDS) in described
    assert set(schema["properties"]) == {*HASHED_FIELDS, *records.ENVELOPE_FIELDS}


def test_identity_comes_from_the_event_when_it_names_one() -> None:
    login = _records()[-1]
    assert login["identity"] == {"issuer": "https://idp.example.net", "subject": "00u1"}
    assert records.identity_of({"issuer": "i", "subject": "s"}) == {"issuer": "i", "subject": "s"}
    assert records.identity_of({"issuer": "i"}) is None
    # every event by someone signed in through the provider (audit.services.record)
    actor = {"actor_identity": {"issuer": "https://idp.test", "subject": "u-7"}, "reason": "x"}
    assert records.identity_of(actor) == {"issuer": "https://idp.test", "subject": "u-7"}
    assert records.identity_of(["issuer", "subject"]) is None


def test_severity_follows_the_action() -> None:
    assert records.severity_of(AuditAction.CHANGE_BREAK_GLASS) is records.Severity.ALERT
    assert records.severity_of(AuditAction.HOST_KEY_CHANGED) is records.Severity.WARNING
    assert records.severity_of(AuditAction.AUTH_LOGIN_FAILED) is records.Severity.WARNING
    assert records.severity_of(AuditAction.PROBE_COMPLETED) is records.Severity.INFORMATIONAL
    assert records.severity_of(AuditAction.CHANGE_APPROVED) is records.Severity.NOTICE
    assert records.severity_of("an.action.added.later") is records.Severity.NOTICE


def test_the_syslog_message_is_rfc_5424_with_the_chain_in_structured_data() -> None:
    record = _records()[1]
    siem = destination(
        kind="syslog", host="h", facility="local4", hostname="cp-01", app_name="cp", sd_id="x@1"
    )
    text = syslog.message({**record, "redelivery": True}, siem).decode("ascii")
    head, _, msg = text.partition(" [x@1 ")
    assert head == f"<{20 * 8 + 5}>1 {record['created_at']} cp-01 cp - test.event"
    sd, _, body = msg.partition("] ")
    assert sd == (
        f'schema="controlplane.audit/v1" seq="2" hash="{record["hash"]}" '
        f'prev_hash="{record["prev_hash"]}" redelivery="1"'
    )
    # MSG is the record, ASCII-escaped JSON (its label has a "ü"): parsed, it is the record.
    assert body.isascii()
    assert json.loads(body) == {**record, "redelivery": True}
    assert syslog.frame(b"<13>1 x") == b"7 <13>1 x"


def test_header_fields_and_sd_values_are_escaped_as_rfc_5424_asks() -> None:
    assert syslog._param_value('a"b\\c]d') == 'a\\"b\\\\c\\]d'
    assert syslog._printable("host name\twith spaces", 255) == "host_name_with_spaces"
    assert syslog._printable("", 48) == "-"
    assert syslog._printable("x" * 40, 32) == "x" * 32


def test_a_record_too_big_for_syslog_goes_without_its_data_and_says_so() -> None:
    event = services.record(action=AuditAction.PROBE_COMPLETED, data={"blob": "y" * 5000})
    row = delivery.rows_after(event.seq - 1, 1)[0]
    record = records.record_from_row(row, redelivery=False)
    siem = destination(kind="syslog", host="h", max_message_bytes=4096)
    text = syslog.message(record, siem)
    assert len(text) <= 4096
    sent = json.loads(text.split(b"] ", 1)[1])
    assert sent["data"] is None
    data_text = canonical_json({"blob": "y" * 5000}).encode()
    assert sent["data_omitted"] == {
        "bytes": len(data_text),
        "sha256": hashlib.sha256(data_text).hexdigest(),
    }
    assert (sent["hash"], sent["prev_hash"]) == (record["hash"], record["prev_hash"])
    # Under the limit, the whole record goes.
    whole = syslog.message(record, destination(kind="syslog", host="h"))
    assert json.loads(whole.split(b"] ", 1)[1])["data"] == {"blob": "y" * 5000}
