"""docker-compose.yml gives the same demo as `make run`: every part, with health checks."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_compose_runs_every_part_with_health_checks():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat", "fleet", "migrate"} <= set(services)
    for name in ("postgres", "redis", "web", "fleet"):
        assert "healthcheck" in services[name], name
    assert services["worker"]["command"][:3] == ["celery", "-A", "controlplane"]
    assert "--register" in services["fleet"]["command"]
    assert services["web"]["environment"]["DATABASE_URL"].startswith("postgres://")
    assert set(compose["volumes"]) >= {"pgdata", "checkpoints"}


def test_the_env_example_names_every_secret_setting():
    example = (ROOT / ".env.example").read_text()
    for name in ("SECRET_KEY", "FIELD_ENCRYPTION_KEY", "AUDIT_SIGNING_KEY", "DATABASE_URL"):
        assert f"{name}=" in example
