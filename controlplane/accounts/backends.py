"""Who may be signed in, and how: a local password as LOCAL_LOGIN allows, or the team's identity
provider (whose users never have a usable password here)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest

IDENTITY_BACKEND = "controlplane.accounts.backends.IdentityBackend"


def local_login_allows(user: Any) -> bool:
    """LOCAL_LOGIN: on, anyone with a password; admins, only superusers (the break-glass
    administrator); off, nobody."""
    mode = settings.LOCAL_LOGIN
    if mode == "on":
        return True
    return mode == "admins" and bool(getattr(user, "is_superuser", False))


class LocalPasswordBackend(ModelBackend):
    """Django's password check, within LOCAL_LOGIN. ModelBackend.get_user asks
    user_can_authenticate too, so a session it made ends at the next request once LOCAL_LOGIN
    no longer allows its user (a switch to `admins` or `off` takes effect at once)."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> Any:
        user = super().authenticate(request, username=username, password=password, **kwargs)
        # The provider's users sign in there, where their groups are asked for, even if someone
        # gave one a password here.
        if user is not None and hasattr(user, "identity"):
            return None
        return user

    def user_can_authenticate(self, user: Any) -> bool:
        return super().user_can_authenticate(user) and local_login_allows(user)


class IdentityBackend(ModelBackend):
    """Sessions of users the identity provider vouched for (controlplane.accounts.views signs
    them in with `login(..., backend=IDENTITY_BACKEND)` after verifying its ID token). It checks
    no credentials itself, so nothing can authenticate through it."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        return None

    def get_user(self, user_id: Any) -> Any:
        user = super().get_user(user_id)
        if user is None or not hasattr(user, "identity"):
            return None
        return user
