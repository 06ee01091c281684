"""Secrets at rest (SSH keys, webhook secrets) decrypt only with the key they were saved with."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet

from controlplane import crypto


def test_a_token_reads_back_as_what_was_saved_every_time() -> None:
    token = crypto.encrypt("-----BEGIN OPENSSH PRIVATE KEY----- one")
    assert (
        crypto.decrypt(token) == crypto.decrypt(token) == "-----BEGIN OPENSSH PRIVATE KEY----- one"
    )
    assert crypto.encrypt("one") != crypto.encrypt("one")  # Fernet: a fresh IV each time


def test_a_token_fails_under_another_key(settings: Any) -> None:
    token = crypto.encrypt("webhook secret")
    assert crypto.decrypt(token) == "webhook secret"
    settings.FIELD_ENCRYPTION_KEY = Fernet.generate_key().decode()
    with pytest.raises(crypto.SecretUnavailable, match="not the key it was saved with"):
        crypto.decrypt(token)
    assert crypto.decrypt(crypto.encrypt("webhook secret")) == "webhook secret"
