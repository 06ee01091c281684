"""Encryption of secrets at rest (SSH private keys, webhook secrets) with FIELD_ENCRYPTION_KEY."""

from __future__ import annotations

from functools import cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


class SecretUnavailable(Exception):
    """The stored secret cannot be decrypted with the configured key."""


@cache
def _fernet(key: str) -> Fernet:
    return Fernet(key.encode())


def encrypt(plaintext: str) -> str:
    return _fernet(settings.FIELD_ENCRYPTION_KEY).encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet(settings.FIELD_ENCRYPTION_KEY).decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise SecretUnavailable(
            "cannot decrypt the stored key: FIELD_ENCRYPTION_KEY is not the key it was saved with"
        ) from exc
