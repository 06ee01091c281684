"""cpctl audit (search, export, verify) and cpctl tokens (list, create, revoke) against a live
server; and shell completion, which needs no server."""

from __future__ import annotations

import csv
import io
import json

import pytest

from controlplane.api.models import APIToken
from controlplane.audit import services as audit
from controlplane.audit.models import AuditEvent, AuditVerification
from controlplane.cli.exits import ExitCode
from tests.audit.conftest import tamper


@pytest.fixture(autouse=True)
def checkpoint_dir(settings, tmp_path):
    """Verification reads this test's checkpoints, never the developer's."""
    settings.AUDIT_CHECKPOINT_DIR = tmp_path / "audit-checkpoints"


@pytest.fixture
def events(db) -> list[AuditEvent]:
    made = [
        audit.record(action="change.requested", actor="otto", data={"i": i}, correlation_id="c-1")
        for i in range(3)
    ]
    return [*made, audit.record(action="host.probed", actor="system:beat", data={"i": 3})]


def test_search_uses_the_history_pages_filters(cpctl_as, viewer, events):
    cpctl = cpctl_as(viewer)
    ran = cpctl("audit", "search", "--action", "change.*", "--actor", "otto")
    assert ran.code == 0, ran
    assert ran.out.count("change.requested") == 3 and "host.probed" not in ran.out
    found = cpctl("audit", "search", "--correlation", "c-1", "--limit", "2", "--json").json()
    assert [e["seq"] for e in found] == [events[2].seq, events[1].seq]  # newest first
    ran = cpctl("audit", "search", "--since", "not a time")
    assert ran.code == ExitCode.REFUSED, ran
    assert "since:" in ran.err


def test_search_follows_the_pages_up_to_the_limit(cpctl_as, viewer, events):
    for i in range(240):
        audit.record(action="test.bulk", actor="system:test", data={"i": i})
    found = cpctl_as(viewer)("audit", "search", "--action", "test.bulk", "--limit", "230", "--json")
    assert found.code == 0, found
    assert [e["data"]["i"] for e in found.json()] == list(range(239, 9, -1))  # two pages


def test_export_streams_jsonl_to_a_file_and_csv_to_stdout(cpctl_as, viewer, events, tmp_path):
    cpctl = cpctl_as(viewer)
    target = tmp_path / "audit.jsonl"
    ran = cpctl("audit", "export", "--action", "change.requested", "--output", str(target))
    assert ran.code == 0, ran
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert [line["data"]["i"] for line in lines] == [0, 1, 2]  # oldest first
    assert all(len(line["hash"]) == 64 for line in lines)
    ran = cpctl("audit", "export", "--format", "csv", "--actor", "system:beat")
    assert ran.code == 0, ran
    rows = list(csv.DictReader(io.StringIO(ran.out)))
    assert [r["action"] for r in rows] == ["host.probed"]


def test_verify_passes_then_names_the_first_altered_event(cpctl_as, viewer, events):
    cpctl = cpctl_as(viewer)
    ran = cpctl("audit", "verify")
    assert ran.code == 0, ran
    assert ran.out.startswith("OK: ")
    tamper("UPDATE audit_auditevent SET actor = %s WHERE seq = %s", ["mallory", events[1].seq])
    ran = cpctl("audit", "verify", "--json")
    assert ran.code == ExitCode.FAILED, ran
    assert ran.json()["ok"] is False and ran.json()["broken_seq"] == events[1].seq
    # Read-only: the history page's record of verifications is not written by the API.
    assert not AuditVerification.objects.exists()


def test_a_token_is_created_shown_once_used_and_revoked(cpctl_as, operator, approver):
    cpctl = cpctl_as(operator)
    ran = cpctl("tokens", "create", "ci-deploy", "--expires-in-days", "30")
    assert ran.code == 0, ran
    secret = ran.out.strip()  # the secret, alone on stdout
    assert secret.startswith("cpt_") and "\n" not in secret
    assert "shown this once" in ran.err and secret not in ran.err
    token = APIToken.objects.get(name="ci-deploy", user=operator)

    listed = cpctl("tokens", "list")
    assert "ci-deploy" in listed.out and token.prefix in listed.out and secret not in listed.out
    as_listed = cpctl("tokens", "list", "--json").json()
    assert {t["name"] for t in as_listed} == {"ci-deploy", "cpctl tests"}
    assert not any("secret" in t for t in as_listed)

    with_new = cpctl.without("CPCTL_TOKEN")
    assert with_new("hosts", "list", env={"CPCTL_TOKEN": secret}).code == 0
    ran = cpctl("tokens", "revoke", str(token.pk))
    assert ran.code == 0 and "revoked" in ran.out, ran
    ran = with_new("hosts", "list", env={"CPCTL_TOKEN": secret})
    assert ran.code == ExitCode.AUTH, ran

    # Someone else's token is not found, as if it did not exist.
    other = APIToken.objects.get(user=operator, name="cpctl tests")
    ran = cpctl_as(approver)("tokens", "revoke", str(other.pk))
    assert ran.code == ExitCode.NOT_FOUND, ran
    ran = cpctl("tokens", "create", "   ", "--json")
    assert ran.code == ExitCode.REFUSED and "name" in ran.json(), ran


def test_completion_scripts_and_completions_need_no_server(cpctl_offline):
    ran = cpctl_offline("completion", "bash")
    assert ran.code == 0 and "_CPCTL_COMPLETE=bash_complete" in ran.out, ran
    for shell in ("zsh", "fish"):
        assert cpctl_offline("completion", shell).code == 0

    def complete(words: str) -> list[str]:
        current = len(words.split()) - (0 if words.endswith(" ") else 1)
        env = {"_CPCTL_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(current)}
        ran = cpctl_offline(env=env)
        assert ran.code == 0, ran
        return [line.split(",", 1)[1] for line in ran.out.splitlines()]

    assert "changes" in complete("cpctl ch")
    assert set(complete("cpctl changes ")) >= {"approve", "request", "watch", "break-glass"}
    assert complete("cpctl changes request model") == ["model_swap"]
    assert set(complete("cpctl rollouts ")) >= {"create", "approve", "pause", "watch"}
    assert complete("cpctl rollouts create re") == ["redeploy", "restart"]
    assert complete("cpctl rollouts list --status pa") == ["paused"]
