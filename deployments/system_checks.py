"""System checks: settings that would weaken the approval rule are errors at start-up."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error

from .kinds import KINDS
from .unit_files.engine_flags import check_harmless_list


def check_harmless_engine_flags(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return [
        Error(
            f"HARMLESS_ENGINE_FLAGS: {problem}",
            hint="Remove it from the list; changes to it always need approval.",
            id="deployments.E001",
        )
        for problem in check_harmless_list(settings.HARMLESS_ENGINE_FLAGS)
    ]


def check_approval_required_kinds(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A misspelt kind in APPROVAL_REQUIRED_KINDS would quietly let that kind through with one
    person: refuse to start instead."""
    return [
        Error(
            f"APPROVAL_REQUIRED_KINDS: {kind!r} is not a change kind",
            hint=f"The kinds are: {', '.join(KINDS)}.",
            id="deployments.E002",
        )
        for kind in settings.APPROVAL_REQUIRED_KINDS
        if kind not in KINDS
    ]
