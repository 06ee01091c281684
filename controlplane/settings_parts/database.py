"""DATABASES: PostgreSQL in production, SQLite as the embedded default."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def database_config(
    url_config: dict[str, Any], *, base_dir: Path, pid: int, conn_max_age: int
) -> dict[str, Any]:
    """The default database from DATABASE_URL (django-environ's `env.db`), with what each
    engine needs."""
    config = dict(url_config)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # IMMEDIATE transactions serialise writers up front instead of failing on lock upgrade,
        # which keeps the audit chain's appends ordered on SQLite too.
        config.setdefault("OPTIONS", {}).update({"transaction_mode": "IMMEDIATE", "timeout": 20})
        # A file, not memory, so that a Celery worker started by the tests can share it (they
        # pass it its path); one per test process, so that two runs on one machine do not
        # collide. Its folder is made at start-up (controlplane.apps).
        config["TEST"] = {"NAME": str(base_dir / ".run" / f"test-db-{pid}.sqlite3")}
    else:
        # A web worker keeps its connection between requests: a new one costs every page 7-9
        # ms (the connect, and a fresh server process whose catalog caches are cold;
        # bench/README.md). Checked before it is used again, so a database that restarted
        # costs one reconnect, not a failed request. (Celery closes its worker's connection
        # around every task whatever this says; a probe task is a batch of hosts.)
        config["CONN_MAX_AGE"] = conn_max_age
        config["CONN_HEALTH_CHECKS"] = True
    return config
