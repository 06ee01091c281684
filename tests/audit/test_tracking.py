"""Every recorded action leaves an event with the right fields, whether it came through a
sign-in, the admin, a management command or a service; and no event ever holds a secret."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.forms import CheckboxInput, Form, MultiWidget
from django.test import Client
from django.urls import reverse

from controlplane.audit.models import AuditEvent
from deployments.models import Deployment, ModelArtifact
from hosts import services as host_services
from hosts.models import Credential, Host
from tests.conftest import PASSWORD


def events(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("seq"))


def only(action: str) -> AuditEvent:
    found = events(action)
    assert len(found) == 1, f"expected one {action} event, found {len(found)}"
    return found[0]


def every_event_as_text() -> str:
    return json.dumps(list(AuditEvent.objects.values()), default=str, ensure_ascii=False)


def new_private_key() -> str:
    return asyncssh.generate_private_key("ssh-ed25519").export_private_key().decode()


# --- admin forms, filled in the way a browser would -----------------------------------------


def _form_fields(form: Form) -> Iterator[tuple[str, Any]]:
    for name, field in form.fields.items():
        if field.disabled:
            continue
        value = form[name].value()
        key = form.add_prefix(name)
        widget = field.widget
        if isinstance(widget, CheckboxInput):
            if value:
                yield key, "on"
        elif isinstance(widget, MultiWidget):
            parts = widget.decompress(value) if not isinstance(value, list) else value
            for i, (sub, part) in enumerate(zip(widget.widgets, parts, strict=True)):
                yield f"{key}_{i}", sub.format_value(part) or ""
        elif isinstance(value, list | tuple):
            yield key, [str(v) for v in value]
        elif value is not None:
            yield key, value


def admin_form(client: Client, url: str, **changes: Any) -> dict[str, Any]:
    """What the admin page at `url` would submit untouched, with `changes` typed in."""
    response = client.get(url)
    assert response.status_code == 200, url
    data = dict(_form_fields(response.context["adminform"].form))
    for inline in response.context.get("inline_admin_formsets", []):
        formset = inline.formset
        data.update(_form_fields(formset.management_form))
        for form in formset.initial_forms:
            data.update(_form_fields(form))
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


@pytest.fixture
def admin_client(admin_user: User) -> Client:
    client = Client(REMOTE_ADDR="10.1.2.3", HTTP_USER_AGENT="pytest-browser/1.0")
    client.force_login(admin_user)
    return client


@pytest.fixture
def artifact(db: None) -> ModelArtifact:
    return ModelArtifact.objects.create(
        name="moonshotai/Kimi-K2.5",
        variant="NVFP4",
        weights_gib=600,
        path="/models/kimi-k25-nvfp4",
        served_name="kimi-k2.5",
    )


def _changed(event: AuditEvent) -> tuple[dict[str, Any], dict[str, Any]]:
    return event.data["before"], event.data["after"]


def _by_admin(event: AuditEvent, admin_user: User) -> None:
    assert (event.actor, event.actor_user_id) == (admin_user.username, admin_user.pk)
    assert event.ip == "10.1.2.3"
    assert event.user_agent == "pytest-browser/1.0"
    assert len(event.correlation_id) == 32


# --- sign-in -------------------------------------------------------------------------------


def test_signing_in_is_recorded(client: Client, viewer: User) -> None:
    response = client.post(
        reverse("login"), {"username": "vera", "password": PASSWORD}, REMOTE_ADDR="10.0.0.7"
    )
    assert response.status_code == 302
    event = only("auth.login")
    assert (event.actor, event.actor_user_id, event.target_type) == ("vera", viewer.pk, "auth.user")
    assert event.ip == "10.0.0.7"


def test_signing_out_is_recorded(client: Client, viewer: User) -> None:
    client.force_login(viewer)
    client.post(reverse("logout"))
    event = only("auth.logout")
    assert (event.actor, event.target_id) == ("vera", str(viewer.pk))


def test_a_failed_sign_in_is_recorded_without_the_password(client: Client, viewer: User) -> None:
    client.post(reverse("login"), {"username": "vera", "password": "wrong-Tr0ub4dor&3"})
    event = only("auth.login_failed")
    assert event.actor == "anonymous:vera"
    assert event.data == {"username": "vera"}
    assert "Tr0ub4dor" not in every_event_as_text()
    assert not events("auth.login")


# --- hosts ---------------------------------------------------------------------------------


def test_a_host_created_changed_and_deleted_in_the_admin(
    admin_client: Client, admin_user: User
) -> None:
    response = admin_client.post(
        reverse("admin:hosts_host_add"),
        admin_form(
            admin_client, reverse("admin:hosts_host_add"), name="gpu-admin", address="10.0.0.20"
        ),
    )
    assert response.status_code == 302, (
        response.context and response.context["adminform"].form.errors
    )
    host = Host.objects.get(name="gpu-admin")
    created = only("host.created")
    _by_admin(created, admin_user)
    assert (created.target_type, created.target_id, created.target_label) == (
        "hosts.host",
        str(host.pk),
        "gpu-admin",
    )
    assert (created.host_id, created.host_label) == (host.pk, "gpu-admin")
    assert created.data["after"]["address"] == "10.0.0.20"

    url = reverse("admin:hosts_host_change", args=[host.pk])
    admin_client.post(url, admin_form(admin_client, url, port="2222", use_sudo="on"))
    changed = only("host.changed")
    _by_admin(changed, admin_user)
    assert changed.data["fields"] == ["port", "use_sudo"]
    assert _changed(changed) == ({"port": 22, "use_sudo": False}, {"port": 2222, "use_sudo": True})

    admin_client.post(reverse("admin:hosts_host_delete", args=[host.pk]), {"post": "yes"})
    deleted = only("host.deleted")
    _by_admin(deleted, admin_user)
    assert deleted.target_label == "gpu-admin"
    assert deleted.data["before"]["port"] == 2222
    assert not Host.objects.filter(pk=host.pk).exists()


def test_a_host_registered_from_the_command_line(db: None, tmp_path: Path) -> None:
    key = new_private_key()
    key_file = tmp_path / "id_ed25519"
    key_file.write_text(key)
    call_command(
        "add_host",
        "gpu-cli",
        "--address",
        "127.0.0.1",
        "--port",
        "2299",
        "--key-file",
        str(key_file),
        stdout=io.StringIO(),
    )
    host = Host.objects.get(name="gpu-cli")
    created = only("host.created")
    assert (created.actor, created.actor_user_id) == ("system:cli", None)
    assert created.data["after"]["port"] == 2299
    credential = only("credential.created")
    assert credential.actor == "system:cli"
    assert credential.correlation_id == created.correlation_id != ""
    assert credential.data["after"]["private_key_encrypted"] == "[redacted]"
    text = every_event_as_text()
    assert key.strip().splitlines()[1] not in text
    assert host.credential is not None
    assert host.credential.private_key_encrypted not in text


def test_accepting_a_host_key_is_recorded(db: None, admin_user: User) -> None:
    public = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    host = Host.objects.create(name="gpu-key", address="127.0.0.1", presented_host_key=public)
    host_services.host_key_accept(
        host=host,
        actor=admin_user,
        reason="checked on the console",
        reviewed_fingerprint=host.presented_key_fingerprint,
    )
    event = only("host.key_accepted")
    assert (event.actor, event.target_id, event.host_id) == ("root-admin", str(host.pk), host.pk)
    host.refresh_from_db()
    assert event.data["after"] == {"status": "pinned", "fingerprint": host.host_key_fingerprint}
    assert event.data["before"]["status"] == "unknown"
    assert event.data["reason"] == "checked on the console"
    assert not events("host.changed")  # the key is a domain event, not field noise


# --- credentials ---------------------------------------------------------------------------


def test_a_credential_created_changed_and_deleted_in_the_admin(
    admin_client: Client, admin_user: User
) -> None:
    key = new_private_key()
    url = reverse("admin:hosts_credential_add")
    response = admin_client.post(
        url, admin_form(admin_client, url, name="fleet-key", private_key_input=key)
    )
    assert response.status_code == 302
    credential = Credential.objects.get(name="fleet-key")
    created = only("credential.created")
    _by_admin(created, admin_user)
    assert created.target_label == str(credential)
    assert created.data["after"]["fingerprint"] == credential.fingerprint
    assert created.data["after"]["private_key_encrypted"] == "[redacted]"

    url = reverse("admin:hosts_credential_change", args=[credential.pk])
    rotated = new_private_key()
    admin_client.post(
        url, admin_form(admin_client, url, name="fleet-key-2", private_key_input=rotated)
    )
    changed = only("credential.changed")
    assert "private_key_encrypted" in changed.data["fields"]
    assert _changed(changed)[0]["name"] == "fleet-key"
    assert _changed(changed)[1]["private_key_encrypted"] == "[redacted]"
    encrypted_now = Credential.objects.get(pk=credential.pk).private_key_encrypted

    admin_client.post(
        reverse("admin:hosts_credential_delete", args=[credential.pk]), {"post": "yes"}
    )
    deleted = only("credential.deleted")
    assert deleted.data["before"]["name"] == "fleet-key-2"

    text = every_event_as_text()
    for secret in (key, rotated):
        for line in secret.strip().splitlines()[1:-1]:
            assert line not in text
    assert credential.private_key_encrypted not in text
    assert encrypted_now not in text


def test_no_event_ever_contains_a_secret(db: None) -> None:
    key = new_private_key()
    credential = host_services.credential_create(name="secret-check", private_key=key)
    Host.objects.create(name="gpu-secret", address="127.0.0.1", credential=credential)
    text = every_event_as_text()
    assert AuditEvent.objects.filter(action="credential.created").exists()
    assert key not in text
    for line in key.strip().splitlines()[1:-1]:  # any line of the key's base64 body
        assert line not in text
    assert credential.private_key_encrypted not in text
    assert credential.private_key_encrypted[:40] not in text


# --- the model catalog and deployments -------------------------------------------------------


def test_a_model_artifact_created_changed_and_deleted_in_the_admin(
    admin_client: Client, admin_user: User
) -> None:
    url = reverse("admin:deployments_modelartifact_add")
    response = admin_client.post(
        url,
        admin_form(
            admin_client,
            url,
            name="moonshotai/Kimi-K2.5",
            variant="INT4",
            weights_gib="560",
            path="/models/kimi-k25-int4",
            served_name="kimi-k2.5",
        ),
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    artifact = ModelArtifact.objects.get(variant="INT4")
    created = only("modelartifact.created")
    _by_admin(created, admin_user)
    assert created.target_type == "deployments.modelartifact"
    assert created.data["after"]["path"] == "/models/kimi-k25-int4"

    url = reverse("admin:deployments_modelartifact_change", args=[artifact.pk])
    admin_client.post(url, admin_form(admin_client, url, weights_gib="561.5"))
    assert _changed(only("modelartifact.changed")) == (
        {"weights_gib": 560.0},
        {"weights_gib": 561.5},
    )

    admin_client.post(
        reverse("admin:deployments_modelartifact_delete", args=[artifact.pk]), {"post": "yes"}
    )
    assert only("modelartifact.deleted").data["before"]["variant"] == "INT4"


def test_a_deployment_created_changed_and_deleted_in_the_admin(
    admin_client: Client, admin_user: User, artifact: ModelArtifact
) -> None:
    host = Host.objects.create(name="gpu-dep", address="127.0.0.1")
    url = reverse("admin:deployments_deployment_add")
    response = admin_client.post(
        url,
        admin_form(
            admin_client,
            url,
            host=str(host.pk),
            unit="vllm-kimi-k25.service",
            model=str(artifact.pk),
        ),
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    deployment = Deployment.objects.get(unit="vllm-kimi-k25.service")
    created = only("deployment.created")
    _by_admin(created, admin_user)
    assert (created.host_id, created.host_label) == (host.pk, "gpu-dep")
    assert created.data["after"]["unit"] == "vllm-kimi-k25.service"

    url = reverse("admin:deployments_deployment_change", args=[deployment.pk])
    admin_client.post(url, admin_form(admin_client, url, tensor_parallel_size="4"))
    changed = only("deployment.changed")
    assert _changed(changed) == ({"tensor_parallel_size": 8}, {"tensor_parallel_size": 4})
    assert changed.host_id == host.pk

    admin_client.post(
        reverse("admin:deployments_deployment_delete", args=[deployment.pk]), {"post": "yes"}
    )
    deleted = only("deployment.deleted")
    assert (deleted.target_label, deleted.host_label) == (
        "vllm-kimi-k25.service on gpu-dep",
        "gpu-dep",
    )


# --- users and roles -----------------------------------------------------------------------


def test_a_user_created_given_roles_changed_and_deleted_in_the_admin(
    admin_client: Client, admin_user: User, viewer: User
) -> None:
    start = AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
    url = reverse("admin:auth_user_add")
    response = admin_client.post(
        url,
        admin_form(admin_client, url, username="newbie", password1=PASSWORD, password2=PASSWORD),
    )
    assert response.status_code == 302
    user = User.objects.get(username="newbie")
    created = AuditEvent.objects.get(seq__gt=start, action="user.created")
    _by_admin(created, admin_user)
    assert created.target_label == "newbie"
    assert created.data["after"]["password"] == "[redacted]"

    operator_group = Group.objects.get(name="operator")
    url = reverse("admin:auth_user_change", args=[user.pk])
    admin_client.post(
        url,
        admin_form(admin_client, url, email="newbie@example.test", groups=[str(operator_group.pk)]),
    )
    changed = AuditEvent.objects.get(seq__gt=start, action="user.changed")
    before, after = _changed(changed)
    # (the admin also posts date_joined to the second, which is a real, recorded change)
    assert (before["email"], after["email"]) == ("", "newbie@example.test")
    roles = AuditEvent.objects.get(seq__gt=start, action="user.roles_changed")
    _by_admin(roles, admin_user)
    assert roles.data == {"change": "add", "groups": ["operator"]}
    assert roles.correlation_id == changed.correlation_id  # one request, one story

    admin_client.post(url, admin_form(admin_client, url, groups=[]))
    removed = (
        AuditEvent.objects.filter(seq__gt=start, action="user.roles_changed")
        .order_by("-seq")
        .first()
    )
    assert removed is not None and removed.data["change"] in {"remove", "clear"}

    admin_client.post(reverse("admin:auth_user_delete", args=[user.pk]), {"post": "yes"})
    deleted = AuditEvent.objects.get(seq__gt=start, action="user.deleted")
    assert (deleted.target_label, deleted.target_id) == ("newbie", str(user.pk))
    assert PASSWORD not in every_event_as_text()


def test_role_changes_outside_the_admin_are_recorded(db: None, viewer: User) -> None:
    approver_group = Group.objects.get(name="approver")
    viewer.groups.add(approver_group)
    event = events("user.roles_changed")[-1]
    assert (event.target_label, event.data) == ("vera", {"change": "add", "groups": ["approver"]})
    viewer.groups.remove(approver_group)
    assert events("user.roles_changed")[-1].data == {"change": "remove", "groups": ["approver"]}


def test_a_role_group_created_and_renamed_in_the_admin(
    admin_client: Client, admin_user: User
) -> None:
    url = reverse("admin:auth_group_add")
    admin_client.post(url, admin_form(admin_client, url, name="auditors"))
    group = Group.objects.get(name="auditors")
    created = AuditEvent.objects.get(action="group.created", target_id=str(group.pk))
    _by_admin(created, admin_user)
    assert created.target_label == "auditors"
    url = reverse("admin:auth_group_change", args=[group.pk])
    admin_client.post(url, admin_form(admin_client, url, name="auditors-2"))
    assert _changed(only("group.changed")) == ({"name": "auditors"}, {"name": "auditors-2"})
    admin_client.post(reverse("admin:auth_group_delete", args=[group.pk]), {"post": "yes"})
    assert only("group.deleted").target_label == "auditors-2"


def test_sign_in_bookkeeping_is_not_recorded_as_a_user_change(client: Client, viewer: User) -> None:
    client.post(reverse("login"), {"username": "vera", "password": PASSWORD})
    assert not events("user.changed")  # last_login moves on every sign-in: noise
