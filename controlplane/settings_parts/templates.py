"""Django's template engine: fixed, nothing in it comes from the environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def templates_config(base_dir: Path) -> list[dict[str, Any]]:
    """TEMPLATES: the project's templates/ folder, then each app's; these context processors."""
    return [
        {
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "DIRS": [base_dir / "templates"],
            "APP_DIRS": True,
            "OPTIONS": {
                "context_processors": [
                    "django.template.context_processors.request",
                    "django.contrib.auth.context_processors.auth",
                    "django.contrib.messages.context_processors.messages",
                    "controlplane.accounts.context_processors.roles",
                ],
            },
        }
    ]
