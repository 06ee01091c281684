"""Production settings: `manage.py check --deploy` is clean with the documented production
environment, PRODUCTION=true refuses to start on the demo's defaults, and the product runs
without the simulator, which its image does not carry."""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

from tests.without_simulator import WithoutSimulator

ROOT = Path(__file__).resolve().parents[2]


def production_env(**overrides: str) -> dict[str, str]:
    env = {
        "PATH": os.environ["PATH"],
        "PRODUCTION": "true",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "FIELD_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "AUDIT_SIGNING_KEY": base64.b64encode(os.urandom(32)).decode(),
        "ALLOWED_HOSTS": "controlplane.example.com",
        "CSRF_TRUSTED_ORIGINS": "https://controlplane.example.com",
        "SECURE_HTTPS": "true",
        # Settings only: nothing is migrated or connected to.
        "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none",
    }
    env.update(overrides)
    return {k: v for k, v in env.items() if v is not None}


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_check_deploy_is_clean_with_the_production_environment():
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=production_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_without_https_check_deploy_says_what_is_missing():
    result = manage("check", "--deploy", "--fail-level", "WARNING",
                    env=production_env(SECURE_HTTPS="false"))  # fmt: skip
    assert result.returncode != 0
    assert "SESSION_COOKIE_SECURE" in result.stderr + result.stdout


def test_production_refuses_to_start_on_demo_defaults():
    env = production_env()
    del env["FIELD_ENCRYPTION_KEY"], env["AUDIT_SIGNING_KEY"]
    result = manage("check", env=env)
    assert result.returncode != 0
    assert "these must be too: FIELD_ENCRYPTION_KEY, AUDIT_SIGNING_KEY" in result.stderr
    assert env["SECRET_KEY"] not in result.stderr + result.stdout


# Every product module but the two that register a simulated fleet (ARCHITECTURE.md), imported
# as the web server, the worker and beat would: the settings, the apps, the URLs, the Celery
# app with its tasks, migrations and management commands.
IMPORT_THE_PRODUCT = """
import importlib, os, pkgutil, sys
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django.setup()
from controlplane.celery import app
app.loader.import_default_modules()
import controlplane.urls, controlplane.wsgi
BRIDGE = {"deployments.simfleet_registration", "deployments.management.commands.simfleet"}
for package in ("controlplane", "hosts", "deployments"):
    root = importlib.import_module(package)
    for module in pkgutil.walk_packages(root.__path__, package + "."):
        if module.name not in BRIDGE:
            importlib.import_module(module.name)
print("imported", len([m for m in sys.modules if m.split(".")[0] in ("controlplane", "hosts",
      "deployments")]), "product modules")
"""


def test_the_product_runs_without_the_simulator(tmp_path):
    """The production image carries no simulator: its checks pass and nothing it loads (apps,
    URLs, tasks, migrations, commands) so much as tries to import it."""
    nosim = WithoutSimulator(tmp_path, production_env())
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=nosim.env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
    result = subprocess.run([sys.executable, "-c", IMPORT_THE_PRODUCT], cwd=ROOT, env=nosim.env,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "product modules" in result.stdout
    assert nosim.attempts() == []
