"""Keys derived from SECRET_KEY when theirs is unset, so that the demo runs on one secret.

Each derivation has its own label, so knowing one derived key tells nothing of another. A
production install sets every key independently (settings_parts.validation)."""

from __future__ import annotations

import base64
import hashlib


def derived_fernet_key(secret: str) -> str:
    """A Fernet key (32 url-safe base64 bytes) for FIELD_ENCRYPTION_KEY."""
    return base64.urlsafe_b64encode(
        hashlib.sha256(b"field-encryption:" + secret.encode()).digest()
    ).decode()


def derived_signing_seed(secret: str) -> str:
    """A base64 Ed25519 private seed (32 bytes) for AUDIT_SIGNING_KEY."""
    return base64.b64encode(hashlib.sha256(b"audit-signing:" + secret.encode()).digest()).decode()
