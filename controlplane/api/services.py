"""Writes about API tokens: create (the secret is returned once), revoke, and recognise one."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction

from .models import APIToken

TOKEN_SCHEME = "cpt"
# last_used_at is written at most this often per token, not on every request.
LAST_USED_RESOLUTION = dt.timedelta(seconds=60)
MAX_TOKEN_LENGTH = 200


@dataclass(frozen=True)
class IssuedToken:
    token: APIToken
    secret: str  # the whole token; shown to its owner once and stored nowhere


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def token_create(*, user: Any, name: str, expires_at: dt.datetime | None = None) -> IssuedToken:
    """Issue a token for `user`. The prefix is random and separate from the secret part, so
    showing it (in lists and the audit log) reveals nothing of the secret."""
    name = name.strip()[:100]
    prefix = f"{TOKEN_SCHEME}_{secrets.token_hex(4)}"
    raw = f"{prefix}_{secrets.token_urlsafe(32)}"
    with transaction.atomic():
        token = APIToken.objects.create(
            user=user, name=name, prefix=prefix, digest=token_digest(raw), expires_at=expires_at
        )
        audit.record(
            action=AuditAction.API_TOKEN_CREATED,
            actor=user,
            target=token,
            data={
                "name": token.name,
                "prefix": token.prefix,
                "owner": user.get_username(),
                "expires_at": expires_at.isoformat() if expires_at else None,
            },
        )
    return IssuedToken(token=token, secret=raw)


def token_revoke(*, token: APIToken, user: Any) -> APIToken:
    """Revoke one of `user`'s own tokens; revoking twice changes nothing and records nothing."""
    with transaction.atomic():
        revoked = APIToken.objects.filter(pk=token.pk, user=user, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        token.refresh_from_db(fields=["revoked_at"])
        if revoked:
            audit.record(
                action=AuditAction.API_TOKEN_REVOKED,
                actor=user,
                target=token,
                data={"name": token.name, "prefix": token.prefix, "owner": user.get_username()},
            )
    return token


def token_authenticate(*, raw: str, now: dt.datetime | None = None) -> APIToken | None:
    """The active token `raw` names, with its user, or None (unknown, revoked, expired, or its
    user deactivated). Lookup is by digest, so the secret is never compared as text."""
    if not raw or len(raw) > MAX_TOKEN_LENGTH or not raw.startswith(f"{TOKEN_SCHEME}_"):
        return None
    now = now or timezone.now()
    token = APIToken.objects.select_related("user").filter(digest=token_digest(raw)).first()
    if token is None or not token.is_active(now) or not token.user.is_active:
        return None
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        # A conditional update: concurrent requests with the same token write it once.
        APIToken.objects.filter(pk=token.pk, last_used_at=token.last_used_at).update(
            last_used_at=now
        )
        token.last_used_at = now
    return token
