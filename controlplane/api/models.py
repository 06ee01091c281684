"""Personal API tokens. Only a SHA-256 digest of each token is stored."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.models import User
from django.db import models
from django.utils import timezone


class APIToken(models.Model):
    """A user's bearer token for the JSON API.

    The token itself is shown once, when it is created; the database keeps its SHA-256 digest
    (to recognise it) and a short random prefix that is not part of the secret (to tell tokens
    apart in lists and in the audit log). A token stops working when it is revoked, when it
    expires, or when its user is deactivated.
    """

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, editable=False)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "API token"
        indexes = [
            # the token page: one user's tokens, newest first
            models.Index(fields=["user", "-created_at"], name="apitoken_user_created"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def is_active(self, now: dt.datetime | None = None) -> bool:
        now = now or timezone.now()
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > now

    def state(self, now: dt.datetime | None = None) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if not self.is_active(now):
            return "expired"
        return "active"
