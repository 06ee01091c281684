"""Running the real `cpctl` console script, as a subprocess, against a live server.

Each run gets an environment of its own: the server's URL and a token of the user it acts as
in CPCTL_URL and CPCTL_TOKEN, a HOME and XDG_CONFIG_HOME in the test's temporary directory (so
no developer's config file is read), and nothing of the test process's Django settings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from controlplane.api import services as token_services

CPCTL = Path(sys.executable).parent / "cpctl"


@dataclass
class Ran:
    args: tuple[str, ...]
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def __str__(self) -> str:  # what a failed assertion shows
        command = " ".join(self.args)
        return f"cpctl {command} -> {self.code}\n--- stdout\n{self.out}--- stderr\n{self.err}"


@dataclass
class Cpctl:
    env: dict[str, str]

    def __call__(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Ran:
        if not CPCTL.exists():
            pytest.fail(f"{CPCTL} is missing: `make install` installs the console script")
        done = subprocess.run(
            [str(CPCTL), *args], env={**self.env, **(env or {})}, capture_output=True,
            text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        return Ran(args, done.returncode, done.stdout, done.stderr)

    def without(self, *names: str) -> Cpctl:
        return Cpctl({k: v for k, v in self.env.items() if k not in names})


def bare_environment(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "LANG": "C.UTF-8",
    }


@pytest.fixture
def cpctl_offline(tmp_path: Path) -> Cpctl:
    """cpctl with no server and no token configured."""
    return Cpctl(bare_environment(tmp_path))


@pytest.fixture
def cpctl_as(live_server: Any, tmp_path: Path) -> Callable[[User], Cpctl]:
    """`cpctl_as(user)`: cpctl talking to the live server with a fresh token of `user`."""

    def make(user: User) -> Cpctl:
        secret = token_services.token_create(user=user, name="cpctl tests").secret
        env = {**bare_environment(tmp_path), "CPCTL_URL": live_server.url, "CPCTL_TOKEN": secret}
        return Cpctl(env)

    return make
