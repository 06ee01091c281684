"""Users who sign in at the team's identity provider: who they are here, and the groups the
provider says they have, kept true at each sign-in and before each request that acts.

A user is found by the ID token's issuer and subject, never by e-mail or name: a provider's user
called "admin" is not the local admin. Their roles follow IdentityGroup rows, which only
`identity_groups_replace` writes (controlplane.accounts.roles reads them against the mappings).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from django.conf import settings
from django.contrib.auth import logout
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction

from . import oidc
from .models import Identity, IdentityGroup, validate_idp_group
from .roles import scope_forget

# More groups than anyone carries; a claim with more is cut here and the rest noted as ignored.
GROUPS_MAX = 500
# How many ignored values an audit note quotes, and how much of each.
IGNORED_SHOWN, IGNORED_CHARS = 10, 80
# A provider's user gets a user name no local account can have: Django's user name validator
# (and so the admin and createsuperuser) refuses ':'.
USERNAME_PREFIX = "sso:"
_NOT_IN_A_USERNAME = re.compile(r"[^\w.@+-]+")
_EMAIL = re.compile(r"\A[^@\s]{1,64}@[^@\s]{1,190}\Z")


def groups_from_claim(value: Any) -> tuple[list[str], list[str]]:
    """The group names in a claim's value (a list of names; one name alone is taken as a list of
    one), sorted and unique, and what was not a valid name, shown as text."""
    if value is None:
        return [], []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        return [], [_shown(value)]
    valid: set[str] = set()
    ignored: list[str] = []
    for item in items:
        try:
            if not isinstance(item, str):
                raise ValidationError("not a string")
            validate_idp_group(item)
        except ValidationError:
            ignored.append(_shown(item))
            continue
        if len(valid) < GROUPS_MAX:
            valid.add(item)
        else:
            ignored.append(_shown(item))
    return sorted(valid), ignored


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= IGNORED_CHARS else text[: IGNORED_CHARS - 1] + "…"


def _free_username(claims: dict[str, Any]) -> str:
    """sso:<the provider's user name>, or sso:<name>-2 ... when another user has it."""
    email = claims.get("email")
    wanted = claims.get("preferred_username") or (
        email.split("@", 1)[0] if isinstance(email, str) else ""
    )
    base = _NOT_IN_A_USERNAME.sub("-", str(wanted or "user")).strip("-")[:100] or "user"
    username = f"{USERNAME_PREFIX}{base}"
    taken = set(
        User.objects.filter(username__startswith=username).values_list("username", flat=True)
    )
    number = 1
    while username in taken:
        number += 1
        username = f"{USERNAME_PREFIX}{base}-{number}"
    return username


def _profile(claims: dict[str, Any]) -> dict[str, str]:
    """The name and e-mail a person sees here: shown, never used to find them."""
    email = claims.get("email")
    return {
        "email": email if isinstance(email, str) and _EMAIL.match(email) else "",
        "first_name": str(claims.get("given_name") or claims.get("name") or "")[:150],
        "last_name": str(claims.get("family_name") or "")[:150],
    }


def identity_sign_in(*, signed_in: oidc.SignedIn, request: HttpRequest | None = None) -> User:
    """The user the provider vouched for, made on first sign-in, with their groups replaced by
    what the provider says now. Refuses a user disabled here."""
    claim = settings.OIDC_GROUPS_CLAIM
    source = signed_in.claims
    if claim not in source:
        # Many providers put groups in userinfo only (OpenID Connect Core 5.4).
        source = oidc.userinfo(access_token=signed_in.access_token, subject=signed_in.subject)
    groups, ignored = groups_from_claim(source.get(claim))
    with transaction.atomic():
        audit.chain_lock()
        identity = (
            Identity.objects.select_for_update()
            .select_related("user")
            .filter(issuer=signed_in.issuer, subject=signed_in.subject)
            .first()
        )
        if identity is None:
            identity = _identity_link(signed_in=signed_in, request=request)
        user = identity.user
        if not user.is_active:
            raise oidc.SignInRefused(
                "account_disabled",
                "Your account is disabled here; an administrator can enable it.",
                status=403,
            )
        profile = _profile(signed_in.claims)
        changed = [k for k, v in profile.items() if v and getattr(user, k) != v]
        for field in changed:
            setattr(user, field, profile[field])
        if changed:
            user.save(update_fields=changed)
        identity_groups_replace(
            identity=identity, groups=groups, ignored=ignored, source="sign-in", request=request
        )
    return user


def _identity_link(*, signed_in: oidc.SignedIn, request: HttpRequest | None) -> Identity:
    profile = _profile(signed_in.claims)
    user = User.objects.create_user(_free_username(signed_in.claims), **profile)  # no password
    identity = Identity.objects.create(
        user=user, issuer=signed_in.issuer, subject=signed_in.subject
    )
    audit.record(
        action=AuditAction.IDENTITY_LINKED,
        actor=user,
        target=user,
        request=request,
        data={"username": user.get_username()},
    )
    return identity


def identity_groups_replace(
    *,
    identity: Identity,
    groups: list[str],
    ignored: list[str],
    source: str,
    request: HttpRequest | None = None,
) -> bool:
    """Make the user's IdentityGroup rows exactly `groups`, as the provider just said; audit the
    change (before and after) and what was ignored. True when the groups changed."""
    with transaction.atomic():
        audit.chain_lock()
        Identity.objects.select_for_update().filter(pk=identity.pk).get()
        before = set(identity.groups.values_list("name", flat=True))
        after = set(groups)
        removed, added = sorted(before - after), sorted(after - before)
        if removed:
            identity.groups.filter(name__in=removed).delete()
        IdentityGroup.objects.bulk_create(
            [IdentityGroup(identity=identity, name=name) for name in added]
        )
        identity.groups_checked_at = timezone.now()
        identity.save(update_fields=["groups_checked_at"])
        claim = settings.OIDC_GROUPS_CLAIM
        if removed or added:
            audit.record(
                action=AuditAction.IDENTITY_GROUPS_CHANGED,
                actor=identity.user,
                target=identity.user,
                request=request,
                data={
                    "source": source,
                    "claim": claim,
                    "before": sorted(before),
                    "after": sorted(after),
                    "added": added,
                    "removed": removed,
                },
            )
        if ignored:
            audit.record(
                action=AuditAction.IDENTITY_GROUPS_IGNORED,
                actor=identity.user,
                target=identity.user,
                request=request,
                data={
                    "source": source,
                    "claim": claim,
                    "count": len(ignored),
                    "ignored": ignored[:IGNORED_SHOWN],
                },
            )
    scope_forget(identity.user)
    return bool(removed or added)


def identity_groups_due(*, identity: Identity, now: dt.datetime) -> bool:
    """Whether a request that only reads must ask the provider again first."""
    checked = identity.groups_checked_at
    every = dt.timedelta(seconds=settings.OIDC_GROUPS_RECHECK_SECONDS)
    return checked is None or now - checked >= every


def identity_groups_refresh(
    *, identity: Identity, access_token: str | None, request: HttpRequest | None = None
) -> bool:
    """Ask the provider (userinfo, with this sign-in's access token) which groups the user has
    now, and replace theirs. Raises oidc.TokenNotAccepted when the sign-in is over,
    oidc.ProviderUnavailable when the provider gives no usable answer."""
    if not access_token:
        raise oidc.TokenNotAccepted("This sign-in has no access token to ask the provider with.")
    answer = oidc.userinfo(access_token=access_token, subject=identity.subject)
    groups, ignored = groups_from_claim(answer.get(settings.OIDC_GROUPS_CLAIM))
    return identity_groups_replace(
        identity=identity, groups=groups, ignored=ignored, source="userinfo", request=request
    )


def identity_of(user: Any) -> Identity | None:
    """The user's identity at the provider, or None for a local account (or nobody)."""
    if not getattr(user, "is_authenticated", False):
        return None
    try:
        identity: Identity = user.identity
    except Identity.DoesNotExist:
        return None
    return identity


def api_token_refusal(*, user: Any, now: dt.datetime) -> str | None:
    """Why an API token of this user may not be used now, or None. A provider's user is not
    asked again on each API call (a token has no access token of the provider's to ask with):
    the token acts on the groups last confirmed at a sign-in or a page's re-check, and stops
    once those are older than OIDC_API_TOKEN_GROUPS_MAX_AGE_SECONDS."""
    identity = identity_of(user)
    if identity is None:
        return None
    limit = dt.timedelta(seconds=settings.OIDC_API_TOKEN_GROUPS_MAX_AGE_SECONDS)
    checked = identity.groups_checked_at
    if checked is not None and now - checked < limit:
        return None
    return (
        "This token's owner signs in at the identity provider, which has not confirmed their "
        f"groups for more than {limit}: sign in to the control plane again to use it."
    )


def sign_in_end(*, request: HttpRequest, reason: str) -> None:
    """End this session because the provider no longer vouches for it; audited once, with the
    reason, as auth.sign_in_ended (controlplane.accounts.signals)."""
    request._sign_in_ended = reason  # type: ignore[attr-defined]
    request.session.pop(oidc.ACCESS_TOKEN_SESSION_KEY, None)
    logout(request)
