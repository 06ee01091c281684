"""Logging: one console handler, and everything it prints passes controlplane.redaction first
(an error may quote host output)."""

from __future__ import annotations

from typing import Any


def logging_config(*, level: str) -> dict[str, Any]:
    return {
        "version": 1,
        "disable_existing_loggers": False,
        # Whatever is logged passes controlplane.redaction first (an error may quote host output).
        "filters": {"redact": {"()": "controlplane.redaction.RedactingFilter"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"]}},
        "root": {"handlers": ["console"], "level": level},
        # Sign-ins are audited; django-axes' own INFO lines would repeat each one in the log.
        # Authlib's DEBUG lines carry the PKCE code verifier of each sign-in.
        "loggers": {
            "asyncssh": {"level": "WARNING"},
            "axes": {"level": "WARNING"},
            "authlib": {"level": "INFO"},
        },
    }
