"""`manage.py simfleet --register` as a newcomer runs it: a separate process, its own database."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _free_port_range(count: int) -> int:
    for base in range(24000, 30000, 50):
        try:
            socks = []
            for port in range(base, base + count):
                s = socket.socket()
                s.bind(("127.0.0.1", port))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def test_simfleet_registers_hosts_on_the_ports_it_listens_on(tmp_path):
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path}/demo.sqlite3")
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, cwd=ROOT)
    base = _free_port_range(3)
    fleet = subprocess.Popen(
        [*manage, "simfleet", "--hosts", "3", "--base-port", str(base), "--register",
         "--state-dir", str(tmp_path / "fleet")],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert fleet.stdout is not None
        lines = []
        for line in fleet.stdout:
            lines.append(line)
            if "listening" in line:
                break
        assert any("registered 3 hosts" in line for line in lines), lines
        probe = subprocess.run(
            [*manage, "probe", "all", "--json"], env=env, cwd=ROOT, capture_output=True, text=True
        )
        assert probe.returncode == 0, probe.stderr
        assert probe.stdout.count('"status": "ok"') == 3, probe.stdout
    finally:
        fleet.send_signal(signal.SIGTERM)
        assert fleet.wait(20) == 0
