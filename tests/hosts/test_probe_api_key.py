"""A server started with an API key is probed as its own clients call it: with the key its unit
gives it, read on the host from where the unit gets it, sent on curl's stdin, never stored;
a 401 the probe cannot answer is a problem in the snapshot, not "serves nothing"."""

from __future__ import annotations

import time

import pytest

from hosts import commands
from hosts import services as host_services
from hosts.models import Host
from hosts.parsers.api_keys import unit_api_key
from simulator import catalog
from tests.fleet import register, ssh

UNIT = "vllm-kimi-k25.service"
KEY = "sk-test-0123456789abcdef"


def cat(fragment: str, *drop_ins: tuple[str, str]) -> str:
    """What `systemctl cat` prints for a fragment and its drop-ins."""
    parts = [f"# /etc/systemd/system/{UNIT}\n{fragment}"]
    parts += [f"\n# {path}\n{text}" for path, text in drop_ins]
    return "".join(parts)


ENGINE = "ExecStart=/opt/vllm/.venv/bin/vllm serve /models/x --port 8000"


@pytest.mark.parametrize(
    ("fragment", "files", "key"),
    [
        (f"[Service]\n{ENGINE} --api-key {KEY}\n", {}, KEY),
        (f"[Service]\n{ENGINE} --api-key={KEY}\n", {}, KEY),
        (f"[Service]\n{ENGINE} --api_key {KEY}\n", {}, KEY),
        (f"[Service]\n{ENGINE} --api-key first --api-key {KEY}\n", {}, KEY),  # the last wins
        (f"[Service]\nEnvironment=VLLM_API_KEY={KEY}\n{ENGINE}\n", {}, KEY),
        (
            f"[Service]\nEnvironmentFile=-/etc/vllm/x.env\n{ENGINE} --api-key ${{MY_KEY}}\n",
            {"/etc/vllm/x.env": f"MY_KEY={KEY}\n"},
            KEY,
        ),
        (  # the environment file's value overrides Environment='s, as systemd has it
            f"[Service]\nEnvironment=VLLM_API_KEY=old\nEnvironmentFile=/etc/vllm/x.env\n{ENGINE}\n",
            {"/etc/vllm/x.env": f'VLLM_API_KEY="{KEY}"\n'},
            KEY,
        ),
        (f"[Service]\n{ENGINE}\n", {}, None),
        (f"[Service]\n{ENGINE} --api-key\n", {}, None),
        ("", {}, None),
    ],
)
def test_the_key_is_read_as_systemd_and_the_engine_read_it(fragment, files, key) -> None:
    assert unit_api_key(cat(fragment), files) == key


def test_a_drop_in_that_replaces_the_command_line_decides_the_key() -> None:
    drop_in = ("/etc/systemd/system/x.service.d/key.conf", f"[Service]\nExecStart=\n{ENGINE}\n")
    assert unit_api_key(cat(f"[Service]\n{ENGINE} --api-key {KEY}\n", drop_in), {}) is None


def test_the_key_goes_on_stdin_escaped_and_never_as_an_argument() -> None:
    argv = commands.http_get(8000, "/v1/models", config_on_stdin=True)
    assert KEY not in " ".join(argv) and argv[-3:-1] == ["-K", "-"]
    assert commands.curl_auth_config('a"b\\c') == 'header = "Authorization: Bearer a\\"b\\\\c"\n'
    for bad in ("", "a\nheader = x", "a\rb"):
        with pytest.raises(commands.UnsafeCommand):
            commands.curl_auth_config(bad)


# --- end to end, over SSH to a simulated host ---------------------------------------------------


def probe(host: Host):
    return host_services.host_probe(host=Host.objects.get(pk=host.pk), trigger="manual")


def restart_with_key_file(fleet, key: str) -> None:
    """The environment file now sets VLLM_API_KEY; the unit is restarted and loads again."""
    text = catalog.envfile_text() + f"VLLM_API_KEY={key}\n"
    done = ssh(fleet, "gpu-01", f"tee -- {catalog.ENV_FILE} >/dev/null", stdin=text)
    assert done.exit_status == 0, done.stderr
    assert ssh(fleet, "gpu-01", f"systemctl restart {UNIT}").exit_status == 0


@pytest.fixture
def keyed_host(db, make_fleet):
    fleet = register(make_fleet(1, unit_styles={"gpu-01": "envfile"}))
    host = fleet.host("gpu-01")
    assert probe(host).status == "ok"  # the probe now knows the unit's environment file
    restart_with_key_file(fleet, KEY)
    return fleet, host


def wait_serving(host: Host, deadline: float = 30.0):
    started = time.monotonic()
    while True:
        snapshot = probe(host)
        server = snapshot.state().deployments[UNIT].server
        if (server is not None and server.healthy) or time.monotonic() - started > deadline:
            return snapshot
        time.sleep(0.3)


@pytest.mark.integration
def test_a_server_with_an_api_key_is_probed_with_the_units_own_key(keyed_host) -> None:
    fleet, host = keyed_host
    snapshot = wait_serving(host)
    assert snapshot.status == "ok", snapshot.error
    assert snapshot.state().deployments[UNIT].server.models == ["kimi-k2.5"]
    assert KEY not in str(snapshot.parsed) + str(snapshot.raw) + snapshot.error
    sent = [line for line in fleet.command_log("gpu-01") if "/v1/models" in line]
    assert any("-K -" in line for line in sent)
    assert all(KEY not in line for line in fleet.command_log("gpu-01"))


@pytest.mark.integration
def test_a_401_the_probe_cannot_answer_is_a_problem(keyed_host) -> None:
    fleet, host = keyed_host
    wait_serving(host)
    # The file changed after the server started: the key on disk is no longer the server's.
    text = catalog.envfile_text() + "VLLM_API_KEY=sk-rotated-but-not-restarted\n"
    ssh(fleet, "gpu-01", f"tee -- {catalog.ENV_FILE} >/dev/null", stdin=text)
    snapshot = probe(host)
    assert snapshot.status == "partial"
    assert "answered 401" in snapshot.error and "API key" in snapshot.error
    assert "sk-rotated" not in snapshot.error


@pytest.mark.integration
def test_a_change_job_reads_the_key_on_the_host_and_nowhere_else(keyed_host) -> None:
    fleet, host = keyed_host
    wait_serving(host)
    assert host_services.host_api_key(host=host, unit=UNIT) == KEY
    assert all(KEY not in line for line in fleet.command_log("gpu-01"))
