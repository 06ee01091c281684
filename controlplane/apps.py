"""The project package as an app (its templates, static files and commands), and the folders a
process needs before it serves: made once the apps are ready, not when the settings are read,
so that importing the settings writes nothing."""

from __future__ import annotations

from pathlib import Path

from django.apps import AppConfig
from django.conf import settings


class ControlplaneConfig(AppConfig):
    name = "controlplane"

    def ready(self) -> None:
        run_folders_make()


def run_folders_make() -> None:
    """STATIC_ROOT (WhiteNoise warns about a missing one), and the folder of the SQLite test
    database (`.run/`), which SQLite does not create."""
    Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
    database = settings.DATABASES["default"]
    test_name = database.get("TEST", {}).get("NAME")
    if database["ENGINE"] == "django.db.backends.sqlite3" and test_name:
        Path(test_name).parent.mkdir(exist_ok=True)
