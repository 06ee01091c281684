"""System checks: settings that would weaken the approval rule are errors at start-up."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error

from .engine_flags import check_harmless_list


def check_harmless_engine_flags(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return [
        Error(
            f"HARMLESS_ENGINE_FLAGS: {problem}",
            hint="Remove it from the list; changes to it always need approval.",
            id="deployments.E001",
        )
        for problem in check_harmless_list(settings.HARMLESS_ENGINE_FLAGS)
    ]
