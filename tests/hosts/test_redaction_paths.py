"""Every path that shows host text hides the secrets in it: a simulated host whose unit passes
secrets on its command line (which vLLM then prints in its usage error), probed over real SSH,
then read through the on-demand journal, the snapshot API, the snapshot page and the host page.
The ordinary settings on the same command line stay readable on every path."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from controlplane.api import services as token_services
from controlplane.audit.actions import AuditAction
from controlplane.audit.models import AuditEvent
from controlplane.audit.services import record
from hosts import services
from hosts.models import Host
from simulator import catalog
from tests.fleet import register

pytestmark = pytest.mark.integration
UNIT = catalog.DEFAULT_UNIT
DB_PASSWORD = "Hunter2DbSecret"  # `--foo db_password=...` in ExecStart (systemctl cat)
URL_PASSWORD = "Hunter2UrlSecret"  # `https://user:...@host/` (systemctl cat and the journal)
BEARER = "sk-proj-Hunter2BearerSecret0123"  # `Authorization: Bearer ...` (the journal)
SECRETS = (DB_PASSWORD, URL_PASSWORD, BEARER)


def _unit_with_secrets() -> str:
    return catalog.unit_file_text(
        extra_args=(
            "--max-num-batched-tokens",
            "8192",
            "--foo",
            f"db_password={DB_PASSWORD}",
            f"https://mirror:{URL_PASSWORD}@hf-mirror.example.com/kimi",
            "'Authorization:",
            f"Bearer {BEARER}'",
        )
    )


@pytest.fixture
def leaky_host(db, make_fleet):
    """gpu-01 running a unit whose command line carries secrets; vLLM refuses the unknown
    arguments and prints them (argparse's usage error), so they are in its journal too."""
    fleet = register(make_fleet(1))
    fleet.set_unit_file("gpu-01", UNIT, _unit_with_secrets(), reload=True)
    fleet.restart_unit("gpu-01")
    fleet.wait_for_unit("gpu-01", UNIT, "failed")
    journal = "\n".join(fleet.journal("gpu-01"))
    assert all(secret in journal for secret in SECRETS), journal[-2000:]
    host = Host.objects.get(name="gpu-01")
    snapshot = services.host_probe(host=host, trigger="manual")
    return fleet, host, snapshot


def _assert_hidden(body: str) -> None:
    for secret in SECRETS:
        assert secret not in body, secret


def test_the_journal_view_hides_the_secrets_in_the_engines_log(leaky_host, client, viewer):
    _fleet, host, _snapshot = leaky_host
    client.force_login(viewer)

    body = client.get(reverse("hosts:journal", args=[host.name, UNIT])).content.decode()

    assert "vllm: error: unrecognized arguments: --foo db_password=&lt;redacted&gt; " in body
    _assert_hidden(body)
    event = AuditEvent.objects.get(action=AuditAction.HOST_JOURNAL_READ, host_id=host.pk)
    _assert_hidden(json.dumps(event.data))


def test_the_snapshot_api_hides_them_in_raw_and_parsed_output(leaky_host, viewer) -> None:
    _fleet, host, snapshot = leaky_host
    api = APIClient()
    token = token_services.token_create(user=viewer, name="tests").secret
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    body = api.get(f"/api/v1/snapshots/{snapshot.pk}/").json()
    latest = api.get(f"/api/v1/hosts/{host.name}/snapshots/latest/").json()

    unit_cat = body["raw"][f"unitcat:{UNIT}"]["output"]
    assert "--max-num-batched-tokens 8192 --foo db_password=<redacted>" in unit_cat
    (fragment,) = body["parsed"]["deployments"][UNIT]["unit_files"]
    assert "--max-num-batched-tokens 8192" in fragment["text"]
    _assert_hidden(json.dumps(body) + json.dumps(latest))
    # What is stored is redacted already, not only what is shown.
    _assert_hidden(json.dumps(snapshot.raw) + json.dumps(snapshot.parsed))


def test_the_snapshot_and_host_pages_hide_them(leaky_host, client, viewer):
    _fleet, host, snapshot = leaky_host
    client.force_login(viewer)

    snapshot_page = client.get(reverse("hosts:snapshot", args=[snapshot.pk])).content.decode()
    host_page = client.get(reverse("hosts:detail", args=[host.name])).content.decode()

    for body in (snapshot_page, host_page):
        assert "--max-num-batched-tokens 8192" in body
        _assert_hidden(body)


def test_an_audit_events_string_values_are_redacted(db) -> None:
    event = record(
        action=AuditAction.HOST_JOURNAL_READ,
        actor="system:cli",
        data={"error": f"bad line: https://u:{URL_PASSWORD}@h/ db_password={DB_PASSWORD}"},
    )
    assert event.data == {"error": "bad line: https://u:<redacted>@h/ db_password=<redacted>"}


def test_a_snapshot_stored_before_this_redaction_is_shown_redacted(db, client, viewer) -> None:
    """Snapshots are immutable: one a probe stored when redaction hid less (the secrets below
    in the clear) is still shown through today's redaction on the page and in the API."""
    from django.utils import timezone

    from hosts.models import StateSnapshot
    from hosts.services.blobs import raw_store
    from hosts.state import snapshot_digest
    from tests import factories as f

    host = f.make_host("gpu-01")
    f.make_deployment(host, f.make_catalog()["NVFP4"])
    unit = f"[Service]\nExecStart=/v serve m --max-num-seqs 64 --foo db_password={DB_PASSWORD}\n"
    parsed = f.parsed_state()
    parsed["deployments"][f.UNIT]["unit_files"] = [
        {"path": f"/etc/systemd/system/{f.UNIT}", "text": unit, "sha256": "0" * 64}
    ]
    parsed["deployments"][f.UNIT]["journal"] = [f"x vllm[1]: Authorization: Bearer {BEARER}"]
    parsed["problems"] = [{"section": "models", "message": f"https://u:{URL_PASSWORD}@m/ down"}]
    (stored,) = raw_store([{f"unitcat:{f.UNIT}": {"output": unit, "exit_status": 0}}])
    snapshot = StateSnapshot.objects.create(
        host=host,
        taken_at=timezone.now(),
        status="partial",
        trigger="manual",
        duration_ms=100,
        parsed=parsed,
        digest=snapshot_digest(parsed),
        error=f"models: https://u:{URL_PASSWORD}@m/ down",
        raw_index=stored.index,
    )
    client.force_login(viewer)
    api = APIClient()
    api.credentials(
        HTTP_AUTHORIZATION=f"Bearer {token_services.token_create(user=viewer, name='t').secret}"
    )

    bodies = [
        client.get(reverse("hosts:snapshot", args=[snapshot.pk])).content.decode(),
        client.get(reverse("hosts:detail", args=[host.name])).content.decode(),
        json.dumps(api.get(f"/api/v1/snapshots/{snapshot.pk}/").json()),
    ]

    for body in bodies:
        assert "--max-num-seqs 64" in body
        _assert_hidden(body)


def test_a_change_steps_host_output_is_kept_redacted(db) -> None:
    """A job step keeps what the host printed (a failed start's journal): redacted, in its row
    and so on the change page and in the API."""
    from controlplane.clock import Clock
    from deployments.execution.steps import StepJournal
    from deployments.models import ChangeRequest, JobStep
    from tests import factories as f

    deployment = f.make_deployment(f.make_host("gpu-01"), f.make_catalog()["NVFP4"])
    change = ChangeRequest.objects.create(
        host=deployment.host, deployment=deployment, kind="restart",
        snapshot=f.make_snapshot(deployment.host), reason="r", requested_by_name="otto",
        needs_approval=False, params_digest="-", correlation_id="c-1", status="running",
    )  # fmt: skip
    journal = StepJournal(change, Clock())

    with journal.step("start") as step:
        step.output = f"vllm: error: unrecognized arguments: --foo db_password={DB_PASSWORD}"

    assert JobStep.objects.get(pk=step.pk).output == (
        "vllm: error: unrecognized arguments: --foo db_password=<redacted>"
    )


def test_a_step_stored_before_redaction_is_shown_redacted(db, viewer, client) -> None:
    """Steps are history and are never rewritten: one stored with a secret in the clear (before
    output was redacted on the way in) is redacted where it is shown."""
    from deployments.models import ChangeRequest, JobStep
    from tests import factories as f

    deployment = f.make_deployment(f.make_host("gpu-01"), f.make_catalog()["NVFP4"])
    change = ChangeRequest.objects.create(
        host=deployment.host, deployment=deployment, kind="restart",
        snapshot=f.make_snapshot(deployment.host), reason="r", requested_by_name="otto",
        needs_approval=False, params_digest="-", correlation_id="c-1", status="failed",
    )  # fmt: skip
    JobStep.objects.create(
        change=change, seq=1, name="systemctl restart", status="failed",
        started_at=change.created_at,
        output=f"vllm: error: unrecognized arguments: --foo db_password={DB_PASSWORD}",
    )  # fmt: skip
    client.force_login(viewer)
    api = APIClient()
    api.credentials(
        HTTP_AUTHORIZATION=f"Bearer {token_services.token_create(user=viewer, name='t').secret}"
    )
    page = client.get(reverse("deployments:change", args=[change.pk])).content.decode()
    body = json.dumps(api.get(f"/api/v1/changes/{change.pk}/").json())
    for shown in (page, body):
        assert "unrecognized arguments: --foo" in shown
        assert DB_PASSWORD not in shown
