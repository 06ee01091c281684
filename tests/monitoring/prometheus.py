"""Debian's Prometheus, for real: its promtool, and a server started with a configuration of the
test's own, its own storage in a temporary directory, on a free port, as an unprivileged user.

`make prometheus` installs the package (apt-get); `make pytest` depends on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.waiting import wait_until

MONITORING = Path(__file__).resolve().parents[2] / "controlplane/monitoring"
ALERTS = MONITORING / "alerts.yml"
ALERT_TESTS = MONITORING / "alerts_test.yml"


def debian_binary(name: str) -> str:
    # /usr/bin may be missing from a minimal PATH.
    found = shutil.which(name) or shutil.which(name, path="/usr/bin")
    if found is None:
        raise AssertionError(f"{name} is missing: `make prometheus` installs Debian's prometheus")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _unprivileged() -> list[str]:
    # Run as root (CI's containers are), Prometheus would own its files as root; as nobody it
    # needs nothing but its own directory, as a packaged service does.
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]


class Prometheus:
    """A running Prometheus and its HTTP API."""

    def __init__(self, url: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.url, self.process, self.log = url, process, log

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr} if at is None else {"query": expr, "time": str(at)}
        return list(self.api("query", **params)["result"])

    def scraped_at(self, scrapes: int = 1) -> float:
        """A moment at which the newest of at least `scrapes` good scrapes is current: queries
        at that moment see a whole scrape, even if a later one fails (a slow scrape on a busy
        machine times out, and Prometheus then marks the target's series stale)."""

        def good() -> float | None:
            last = "controlplane_metrics_collect_seconds"
            found = self.query(f"{last} and count_over_time({last}[1m]) >= {scrapes}")
            return float(found[0]["value"][0]) if found else None

        return float(wait_until(good, timeout=60, explain=self.explain))

    def explain(self) -> str:
        return self.log.read_text()[-3000:]


@contextlib.contextmanager
def prometheus_scraping(
    *, target: str, token: str, wrong_token: str | None = None
) -> Iterator[Prometheus]:
    """Prometheus scraping http://<target>/metrics every 2 seconds with the token, as the
    README's scrape configuration does, with the shipped alerting rules loaded. With
    `wrong_token`, a second job scrapes with that one."""
    binary = debian_binary("prometheus")
    home = Path(tempfile.mkdtemp(prefix="controlplane-prometheus-"))
    try:
        (home / "data").mkdir()
        shutil.copyfile(ALERTS, home / "alerts.yml")
        jobs = [("gpu-controlplane", token)]
        if wrong_token is not None:
            jobs.append(("wrong-token", wrong_token))
        scrape_configs = []
        for job, secret in jobs:
            credentials = home / f"{job}.token"
            credentials.write_text(secret)
            scrape_configs.append(
                {
                    "job_name": job,
                    "metrics_path": "/metrics",
                    "authorization": {"type": "Bearer", "credentials_file": str(credentials)},
                    "static_configs": [{"targets": [target]}],
                }
            )
        config = {
            # A scrape may take its whole interval on a busy machine.
            "global": {
                "scrape_interval": "2s",
                "scrape_timeout": "2s",
                "evaluation_interval": "1s",
            },
            "rule_files": [str(home / "alerts.yml")],
            "scrape_configs": scrape_configs,
        }
        # JSON is YAML: no second serialiser for one file.
        (home / "prometheus.yml").write_text(json.dumps(config, indent=2))
        if os.geteuid() == 0:
            for path in [home, *home.rglob("*")]:
                shutil.chown(path, "nobody", "nogroup")
        home.chmod(0o755)
        port = free_port()
        log = home / "prometheus.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    *_unprivileged(),
                    binary,
                    f"--config.file={home / 'prometheus.yml'}",
                    f"--storage.tsdb.path={home / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        server = Prometheus(f"http://127.0.0.1:{port}", process, log)
        try:
            wait_until(lambda: _ready(server), timeout=30, explain=server.explain)
            yield server
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _ready(server: Prometheus) -> bool:
    if server.process.poll() is not None:
        raise AssertionError(f"prometheus exited: {server.explain()}")
    try:
        with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        time.sleep(0.1)
        return False
