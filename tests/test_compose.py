"""docker-compose.yml: the demo profile gives what `make run` gives; the production profile runs
no simulated fleet and no demo users, and takes its secrets from .env. The image is built
without the developer's state (.dockerignore)."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def services_in(profile: str) -> dict[str, dict]:
    return {n: s for n, s in compose()["services"].items() if profile in s.get("profiles", [])}


def test_the_demo_profile_runs_every_part_with_health_checks():
    services = services_in("demo")
    assert {"postgres", "redis", "demo-web", "demo-worker", "demo-beat", "fleet"} <= set(services)
    for name in ("postgres", "redis", "demo-web", "fleet"):
        assert "healthcheck" in services[name], name
    assert services["demo-worker"]["command"][:3] == ["celery", "-A", "controlplane"]
    assert "--register" in services["fleet"]["command"]
    assert "demo_users" in " ".join(services["demo-migrate"]["command"])
    assert services["demo-web"]["environment"]["DATABASE_URL"].startswith("postgres://")


def test_the_production_profile_has_no_simulator_no_demo_users_and_no_default_secrets():
    services = services_in("production")
    assert {"postgres", "redis", "migrate", "web", "worker", "beat"} <= set(services)
    assert "fleet" not in services
    for name, service in services.items():
        command = " ".join(service.get("command") or [])
        assert "simfleet" not in command and "demo" not in command, name
        environment = service.get("environment") or {}
        if name in {"web", "worker", "beat", "migrate"}:
            assert environment["PRODUCTION"] == "true"
            for secret in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY", "AUDIT_SIGNING_KEY"):
                assert environment[secret] == f"${{{secret}:-}}", (name, secret)
            for setting in ("ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS"):
                assert environment[setting] == f"${{{setting}:-}}", (name, setting)


def test_the_env_example_names_every_production_setting():
    example = (ROOT / ".env.example").read_text()
    for name in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY", "AUDIT_SIGNING_KEY", "ALLOWED_HOSTS",
                 "CSRF_TRUSTED_ORIGINS", "SECURE_HTTPS", "DATABASE_URL"):  # fmt: skip
        assert f"\n{name}=" in example, name


def test_the_image_leaves_the_developers_state_behind():
    ignored = (ROOT / ".dockerignore").read_text().split()
    for path in (".git", ".venv", ".run", ".env", "*.sqlite3"):
        assert path in ignored, path
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "USER app" in dockerfile and "chown -R app" in dockerfile
