"""Drain hooks: how an administrator's load balancer takes a host out of rotation and puts it
back, kept as rows an administrator manages (the admin; audited like every managed row). A
change request names one of them; it never carries a command or a URL of its own.

A hook is a command on the host or an HTTP call sent from the host (hosts.hook_commands says
why from there), one for draining and one for undraining, each a template whose `{host}`,
`{unit}` and `{port}` are filled in from the change's own rows.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from controlplane.canonical import canonical_digest
from hosts import hook_commands
from hosts.commands import UnsafeCommand

from .choices import DrainHookKind, HttpMethod

# How long a request may let its job wait for requests in flight to finish (seconds).
DEADLINE_MIN_SECONDS = 5
DEADLINE_MAX_SECONDS = 3600
DEADLINE_DEFAULT_SECONDS = 300

ACTIONS = ("drain", "undrain")


def validate_hook_command(value: str) -> None:
    try:
        hook_commands.check_command_template(value.split())
    except UnsafeCommand as exc:
        raise ValidationError(str(exc)) from exc


def validate_hook_url(value: str) -> None:
    try:
        hook_commands.check_url_template(value)
    except UnsafeCommand as exc:
        raise ValidationError(str(exc)) from exc


_COMMAND_HELP = (
    "The program's absolute path, then its words, separated by spaces (no quotes: no word may "
    "hold a space or a shell character). {host}, {unit} and {port} are filled in from the change."
)
_URL_HELP = (
    "http:// or https://, sent from the host with curl (no redirects followed); no credentials "
    "in it. {host}, {unit} and {port} may appear in its path and query."
)


class DrainHook(models.Model):
    """How a host leaves its load balancer's rotation before a destructive change, and returns
    after it: a command on the host, or an HTTP call sent from the host."""

    name = models.SlugField(max_length=64, unique=True, help_text="What requests choose it by.")
    description = models.CharField(max_length=300, blank=True)
    kind = models.CharField(max_length=10, choices=DrainHookKind.choices)
    drain_command = models.CharField(
        max_length=1000, blank=True, validators=[validate_hook_command], help_text=_COMMAND_HELP
    )
    undrain_command = models.CharField(
        max_length=1000, blank=True, validators=[validate_hook_command], help_text=_COMMAND_HELP
    )
    drain_method = models.CharField(
        max_length=6, choices=HttpMethod.choices, default=HttpMethod.POST
    )
    drain_url = models.CharField(
        max_length=hook_commands.MAX_URL_CHARS,
        blank=True,
        validators=[validate_hook_url],
        help_text=_URL_HELP,
    )
    undrain_method = models.CharField(
        max_length=6, choices=HttpMethod.choices, default=HttpMethod.POST
    )
    undrain_url = models.CharField(
        max_length=hook_commands.MAX_URL_CHARS,
        blank=True,
        validators=[validate_hook_url],
        help_text=_URL_HELP,
    )
    timeout_seconds = models.PositiveSmallIntegerField(
        default=30,
        validators=[
            MinValueValidator(hook_commands.TIMEOUT_MIN_SECONDS),
            MaxValueValidator(hook_commands.TIMEOUT_MAX_SECONDS),
        ],
        help_text="How long each call may take before it counts as failed.",
    )
    enabled = models.BooleanField(
        default=True, help_text="Only enabled hooks can be chosen, and only they run."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """The fields its kind needs, and none of the other kind's."""
        errors: dict[str, str] = {}
        if self.kind == DrainHookKind.COMMAND:
            for name in ("drain_command", "undrain_command"):
                if not getattr(self, name).strip():
                    errors[name] = "A command hook needs both commands."
            for name in ("drain_url", "undrain_url"):
                if getattr(self, name):
                    errors[name] = "A command hook calls no URL: leave this empty."
        elif self.kind == DrainHookKind.HTTP:
            for name in ("drain_url", "undrain_url"):
                if not getattr(self, name):
                    errors[name] = "An HTTP hook needs both URLs."
            for name in ("drain_command", "undrain_command"):
                if getattr(self, name).strip():
                    errors[name] = "An HTTP hook runs no command: leave this empty."
        if errors:
            raise ValidationError(errors)

    def definition(self) -> dict[str, Any]:
        """What it runs, as a request binds to it (its digest) and a page shows it."""
        if self.kind == DrainHookKind.HTTP:
            actions: dict[str, Any] = {
                "drain": {"method": self.drain_method, "url": self.drain_url},
                "undrain": {"method": self.undrain_method, "url": self.undrain_url},
            }
        else:
            actions = {
                "drain": {"command": self.drain_command.split()},
                "undrain": {"command": self.undrain_command.split()},
            }
        return {"kind": self.kind, "timeout_seconds": self.timeout_seconds, **actions}

    def digest(self) -> str:
        return canonical_digest(self.definition())

    def shown(self, action: str) -> str:
        """One action's template, as people read it."""
        if self.kind == DrainHookKind.HTTP:
            method, url = (
                (self.drain_method, self.drain_url)
                if action == "drain"
                else (self.undrain_method, self.undrain_url)
            )
            return f"{method} {url}"
        return self.drain_command if action == "drain" else self.undrain_command

    def argv(self, action: str, values: dict[str, str]) -> list[str]:
        """The command line `action` runs on the host (hosts.hook_commands builds and checks
        it again); raises UnsafeCommand for a row that bypassed validation."""
        if action not in ACTIONS:
            raise UnsafeCommand(f"refusing hook action {action!r}")
        if self.kind == DrainHookKind.HTTP:
            method, url = (
                (self.drain_method, self.drain_url)
                if action == "drain"
                else (self.undrain_method, self.undrain_url)
            )
            return hook_commands.hook_request(method, url, values, self.timeout_seconds)
        if self.kind == DrainHookKind.COMMAND:
            command = self.drain_command if action == "drain" else self.undrain_command
            return hook_commands.hook_command(command.split(), values)
        raise UnsafeCommand(f"refusing drain hook kind {self.kind!r}")
