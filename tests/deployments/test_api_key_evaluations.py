"""A server that takes an API key is evaluated as its own clients call it: the coherence suite's
requests and the benchmark client carry the key the unit gives it, read on the host for the
run, sent on stdin (curl's config, the client's own source), never on a command line, in a
step's output, an audit event or the database."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from controlplane.audit.models import AuditEvent
from deployments import services
from deployments.choices import ChangeStatus
from deployments.host_scripts import SERVING_BENCH, serving_bench_source
from deployments.models import ChangeRequest, Evaluation, JobStep
from hosts import commands, engine_commands
from tests import factories as f
from tests.hosts.test_probe_api_key import KEY, UNIT, keyed_host, probe, wait_serving  # noqa: F401
from tests.waiting import wait_for_change


def test_the_key_travels_in_curls_config_with_the_body() -> None:
    argv = engine_commands.api_request(8000, "completions", authenticated=True)
    assert "--data-binary" not in argv and argv[-3:-1] == ["-K", "-"]
    body = json.dumps({"prompt": 'say "hi"\\n\tnow', "model": "m"})
    config = engine_commands.api_request_stdin(body, 'k"ey')
    assert config.startswith('header = "Authorization: Bearer k\\"ey"\n')
    assert engine_commands.api_request_stdin(body, None) == body
    with pytest.raises(commands.UnsafeCommand, match="not JSON"):
        engine_commands.api_request_stdin("@/etc/shadow", KEY)
    with pytest.raises(commands.UnsafeCommand, match="too long to send with an API key"):
        engine_commands.api_request_stdin(json.dumps({"prompt": "w" * 200_000}), KEY)


class _Echo(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        out = json.dumps({"auth": self.headers["authorization"], "body": body.decode()}).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: object) -> None:
        pass


def test_real_curl_sends_the_key_and_the_body_byte_for_byte() -> None:
    """The config is read by the machine's own curl, as a host's would."""
    server = HTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        body = json.dumps({"prompt": 'a "quoted" \\ back\nslash é ' + "w" * 30_000})
        argv = engine_commands.api_request(port, "completions", authenticated=True)
        stdin = engine_commands.api_request_stdin(body, 'sk-"odd\\key')
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        echoed = json.loads(done.stdout.split(f"\n{commands.HTTP_MARK}")[0])
        assert echoed == {"auth": 'Bearer sk-"odd\\key', "body": body}
    finally:
        server.shutdown()


def test_the_benchmark_client_carries_the_key_in_its_source() -> None:
    keyed = serving_bench_source(KEY)
    assert f"API_KEY = {KEY!r}\n" in keyed and keyed.count(KEY) == 1
    assert serving_bench_source(None) == SERVING_BENCH
    compile(keyed, "serving_bench", "exec")
    for bad in ("", "a\nb", "a\x7f"):
        with pytest.raises(commands.UnsafeCommand):
            serving_bench_source(bad)


@pytest.mark.integration
def test_a_keyed_server_passes_its_suite_and_benchmark_and_the_key_stays_on_the_host(
    keyed_host,  # noqa: F811
    celery_worker,
    operator,
) -> None:
    fleet, host = keyed_host
    snapshot = wait_serving(host)
    deployment = fleet.deployments[0]
    services.change_target_for(deployment=deployment, kind="restart")
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="restart", snapshot=probe(host),
        reason="keyed server", benchmark_profile=f.default_benchmark_profile(),
    )  # fmt: skip
    assert snapshot.status == "ok"
    change = wait_for_change(change, timeout=120)
    assert change.status == ChangeStatus.SUCCEEDED, change.status_reason
    runs = {e.kind: e for e in Evaluation.objects.filter(change=change, phase="after")}
    assert runs["coherence"].passed, runs["coherence"].summary
    assert runs["benchmark"].passed, runs["benchmark"].summary
    levels = runs["benchmark"].results["levels"]
    assert levels and all(level["errors"] == 0 and level["completed"] for level in levels), levels
    # Nowhere but the host: not a command line there, a step, an event, a stored result.
    assert all(KEY not in line for line in fleet.command_log("gpu-01"))
    steps = JobStep.objects.filter(change=change)
    assert all(KEY not in s.command + s.output for s in steps)
    events = AuditEvent.objects.filter(correlation_id=change.correlation_id)
    assert all(KEY not in json.dumps(e.data) for e in events)
    stored = Evaluation.objects.filter(change=change).values_list("results", "summary")
    assert all(KEY not in json.dumps(results) + summary for results, summary in stored)
    assert ChangeRequest.objects.filter(params__icontains=KEY).count() == 0
