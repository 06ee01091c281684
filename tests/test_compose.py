"""docker-compose.yml: the demo profile gives what `make run` gives; the production profile runs
no simulated fleet and no demo users, and takes its secrets from .env. The image is built
without the developer's state (.dockerignore); the production image and the product's wheel
carry no simulator, the demo's image adds it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
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


def dockerfile_stages() -> dict[str, tuple[str, list[str]]]:
    """The Dockerfile's stages in order, by name: what each is built FROM, and its instructions
    (comments dropped, continuation lines joined)."""
    lines = [
        line
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if not line.lstrip().startswith("#")
    ]
    stages: dict[str, tuple[str, list[str]]] = {}
    current: list[str] = []
    for line in "\n".join(lines).replace("\\\n", " ").splitlines():
        words = line.split()
        if not words:
            continue
        if words[0].upper() == "FROM":
            assert len(words) == 4 and words[2].upper() == "AS", f"name every stage: {line}"
            current = []
            stages[words[3]] = (words[1], current)
        else:
            current.append(" ".join(words))
    return stages


def stage_chain(name: str) -> list[str]:
    """Every instruction that makes a stage's image: its base stages' first."""
    stages = dockerfile_stages()
    base, instructions = stages[name]
    return (stage_chain(base) if base in stages else []) + instructions


def copied_sources(instructions: list[str]) -> list[str]:
    """What COPY and ADD take from the build context."""
    sources = []
    for line in instructions:
        words = line.split()
        if words[0].upper() in ("COPY", "ADD"):
            assert not any(w.startswith("--from") for w in words), line
            sources += [w.rstrip("/") for w in words[1:-1] if not w.startswith("--")]
    return sources


def test_the_production_image_carries_no_simulator():
    """The simulator runs what it is sent (a rehearsal tool): the image production runs, which is
    also what a plain `docker build .` builds (the last stage), never copies it, nor the whole
    tree (.dockerignore cannot leave the simulator out: the demo's image needs it)."""
    stages = dockerfile_stages()
    assert list(stages)[-1] == "production"
    chain = stage_chain("production")
    sources = copied_sources(chain)
    assert {"controlplane", "hosts", "deployments", "manage.py", "templates"} <= set(sources)
    for source in sources:
        assert source not in (".", "*") and "simulator" not in source, source
    assert not any("simulator" in line for line in chain), chain


def test_the_demo_image_is_the_production_image_with_the_simulator():
    demo, production = stage_chain("demo"), stage_chain("production")
    assert demo[: len(production)] == production
    assert len(demo) == len(production) + 1, demo[len(production) :]
    assert copied_sources(demo[len(production) :]) == ["simulator"]


def test_the_demo_builds_the_demo_image_and_production_the_production_one():
    for profile, target in (("demo", "demo"), ("production", "production")):
        for name, service in services_in(profile).items():
            if "image" in service:
                continue
            assert service["build"] == {"context": ".", "target": target}, (name, profile)


def test_the_products_wheel_carries_no_simulator(tmp_path):
    """What `pip install .` installs (the image runs it): the product's packages, no simulator,
    built with the pinned build backend from a copy of the tree that has the simulator beside
    them, as the repository does."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(ROOT / "pyproject.toml", src)
    for package in ("controlplane", "hosts", "deployments", "simulator"):
        shutil.copytree(ROOT / package, src / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path / "out"),
         str(src)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = (tmp_path / "out").glob("gpu_controlplane-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {"controlplane", "hosts", "deployments"} <= tops
    assert not any(top.startswith("simulator") for top in tops), sorted(tops)
