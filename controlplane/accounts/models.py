"""Host groups and the roles people hold on them.

A role is held everywhere or on one host group's hosts. Where it comes from:

- the Django groups named after the roles (viewer, operator, approver): everywhere, kept by an
  administrator for local accounts, as before host groups existed;
- a RoleGrant: a local account's role on one host group;
- a GroupRoleMapping: what a group at the team's identity provider grants, everywhere or on one
  host group, read against the groups the user's Identity last carried.

`controlplane.accounts.roles.user_scope` reads all three, once per request.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.validators import RegexValidator
from django.db import models

from .choices import Role

# Host group names are short slugs people type in filters and an identity provider's mapping.
validate_host_group_name = RegexValidator(
    r"\A[a-z0-9][a-z0-9_.-]{0,62}\Z",
    "A host group's name is 1 to 63 lowercase letters, digits, '.', '_' or '-', starting with a "
    "letter or digit.",
)
# Group names as identity providers send them: Okta, Entra ID (object ids), Keycloak ("/ops"),
# Google ("ops@example.com"). Printable, no spaces at either end.
validate_idp_group = RegexValidator(
    r"\A[\w@./:=+-][\w@./:=+ -]{0,198}[\w@./:=+-]?\Z",
    "An identity provider's group is 1 to 200 letters, digits, spaces or @ . / : = + - _, "
    "with no space at either end.",
)


class HostGroup(models.Model):
    """A named set of hosts (prod, team-a, h100); a host may be in several. Roles are granted
    per group, so an operator of team-a probes and requests on team-a's hosts only."""

    name = models.CharField(max_length=63, unique=True, validators=[validate_host_group_name])
    description = models.CharField(max_length=300, blank=True)
    # A string reference: hosts sit above accounts, which must not import them.
    hosts = models.ManyToManyField("hosts.Host", related_name="groups", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class RoleGrant(models.Model):
    """A local account's role on one host group's hosts."""

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="role_grants")
    role = models.CharField(max_length=10, choices=Role.choices)
    host_group = models.ForeignKey(HostGroup, on_delete=models.CASCADE, related_name="grants")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user__username", "host_group__name", "role"]
        constraints = [
            models.UniqueConstraint(fields=["user", "role", "host_group"], name="role_grant_once"),
        ]

    def __str__(self) -> str:
        return f"{self.user.get_username()}: {self.role} of {self.host_group.name}"


class GroupRoleMapping(models.Model):
    """What a group at the identity provider grants: a role everywhere (no host group) or on
    one host group's hosts. An administrator keeps these; a user's roles follow the groups the
    provider last said they have (Identity.groups)."""

    idp_group = models.CharField(max_length=200, validators=[validate_idp_group])
    role = models.CharField(max_length=10, choices=Role.choices)
    host_group = models.ForeignKey(
        HostGroup,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="idp_mappings",
        help_text="Empty: the role holds on every host.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["idp_group", "role"]
        constraints = [
            models.UniqueConstraint(
                fields=["idp_group", "role", "host_group"],
                name="idp_mapping_once_per_group",
                condition=models.Q(host_group__isnull=False),
            ),
            models.UniqueConstraint(
                fields=["idp_group", "role"],
                name="idp_mapping_once_everywhere",
                condition=models.Q(host_group__isnull=True),
            ),
        ]
        indexes = [
            # a user's scope: the mappings of the groups they carry
            models.Index(fields=["idp_group"], name="idp_mapping_group"),
        ]

    def __str__(self) -> str:
        where = self.host_group.name if self.host_group_id else "every host"  # type: ignore[union-attr]
        return f"{self.idp_group} -> {self.role} on {where}"


class Identity(models.Model):
    """Who a user is at the team's identity provider: the issuer and subject of their ID
    token, and the groups the provider said they have when it last answered."""

    user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="identity")
    issuer = models.CharField(max_length=300)
    subject = models.CharField(max_length=255)
    # When the provider last told us the groups (sign-in, or the user-info endpoint).
    groups_checked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "identities"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="identity_issuer_subject"),
        ]

    def __str__(self) -> str:
        return f"{self.user.get_username()} ({self.subject} at {self.issuer})"


class IdentityGroup(models.Model):
    """One group the identity provider last said a user has: rows rather than a JSON list, so
    that a user's roles are one query joining them with the mappings."""

    identity = models.ForeignKey(Identity, on_delete=models.CASCADE, related_name="groups")
    name = models.CharField(max_length=200)

    class Meta:
        ordering = ["identity", "name"]
        constraints = [
            models.UniqueConstraint(fields=["identity", "name"], name="identity_group_once"),
        ]

    def __str__(self) -> str:
        return self.name
