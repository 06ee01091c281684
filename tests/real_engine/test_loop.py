"""The product's whole loop against a real vLLM: a simulated host whose unit runs `vllm serve`.

The host is a simulated one (real SSH, simulated systemd and GPUs), attached to the real engine
(simulator.real_engine): starting its unit starts the real server with the unit's arguments and
the API key its EnvironmentFile= gives, curl on the host reaches it, and so does the serving
benchmark's script. It serves two tiny models trained at this test's start
(trained_models.py): `good` answers the coherence suite right, `bad` answers it wrong.

One test, so that its four real starts are the only ones (each 35-90 s on two cores, longer
while other tests compete for them): the unit's first start on the good model; a two-person
swap to the bad one, whose suite fails on the real engine, and the rollback to the good
revision, which passes again; then a swap to the good model under a second name, with the
serving benchmark before and after.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from deployments import services
from deployments.choices import ChangeStatus
from deployments.models import (
    BenchmarkProfile,
    ChangeRequest,
    Deployment,
    Evaluation,
    ModelArtifact,
)
from hosts import services as host_services
from hosts.models import Host
from simulator import real_engine
from tests.fleet import register
from tests.real_engine import environment, server
from tests.waiting import wait_for_change, wait_until

pytestmark = [
    pytest.mark.real_engine,
    pytest.mark.xdist_group("real_engine"),
    pytest.mark.integration,
    pytest.mark.timeout(1800),
]

HOST = "gpu-01"
UNIT = "vllm-tiny.service"
PORT = 8000
ENV_FILE = "/etc/vllm/tiny.env"
MAX_MODEL_LEN = 512
# What the CPU build needs beside the deployment's own fields (float32 weights, no graphs).
EXTRA_ARGS = ["--dtype", "float32", "--enforce-eager"]
# A real start is 35-90 s on two cores; a busy machine doubles that.
JOB_TIMEOUT = 900.0


def unit_text(model: ModelArtifact) -> str:
    """The unit as someone wrote it on the host before the control plane adopted it: the key
    comes from an EnvironmentFile= only root reads."""
    return (
        "[Unit]\n"
        "Description=tiny Llama on the real vLLM\n"
        "After=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"EnvironmentFile={ENV_FILE}\n"
        f"ExecStart=/opt/vllm/.venv/bin/vllm serve {model.path} --served-model-name "
        f"{model.served_name} --tensor-parallel-size 1 --max-model-len {MAX_MODEL_LEN} "
        f"--port {PORT} --host 127.0.0.1 {' '.join(EXTRA_ARGS)}\n"
        "Restart=no\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


def artifact(name: str, path: Path) -> ModelArtifact:
    model = ModelArtifact(
        name=name,
        variant="BF16",
        weights_gib=0.1,
        path=str(path),
        served_name=name,
        smoke_prompt="The capital of France is",
        smoke_expect="Paris",
    )
    model.full_clean()
    model.save()
    return model


def probe(host: Host) -> Any:
    host = Host.objects.select_related("credential").get(pk=host.pk)
    snapshot = host_services.host_probe(host=host, trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    return snapshot


def serving(host: Host, name: str, *, timeout: float = JOB_TIMEOUT) -> Any:
    """The first snapshot in which the unit's server is healthy and serves `name`."""

    def found() -> Any:
        snapshot = probe(host)
        state = snapshot.state().server(UNIT)
        return snapshot if state.healthy and name in state.models else None

    return wait_until(found, timeout=timeout, interval=2.0)


def swap(operator: Any, approver: Any, deployment: Deployment, model: ModelArtifact, **kw: Any):
    change = services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=probe(deployment.host),
        reason=f"swap to {model.name}", model=model, **kw,
    )  # fmt: skip
    assert change.status == ChangeStatus.PENDING_APPROVAL
    services.change_request_approve(
        change=change, approver=approver, snapshot=probe(deployment.host), reason="looks fine"
    )
    return change


def steps(change: ChangeRequest) -> list[tuple[str, str]]:
    return [(s.name, s.status) for s in change.steps.order_by("seq")]


def step_seconds(change: ChangeRequest, prefix: str) -> list[float]:
    return [
        round((s.finished_at - s.started_at).total_seconds(), 1)
        for s in change.steps.order_by("seq")
        if s.name.startswith(prefix) and s.finished_at
    ]


def job_seconds(change: ChangeRequest) -> float:
    ordered = list(change.steps.order_by("seq"))
    last = ordered[-1].finished_at or ordered[-1].started_at
    return round((last - ordered[0].started_at).total_seconds(), 1)


def suites(change: ChangeRequest) -> list[Evaluation]:
    return list(Evaluation.objects.filter(change=change, kind="coherence").order_by("pk"))


def outcomes(evaluation: Evaluation) -> dict[str, str]:
    return {r["name"]: r["outcome"] for r in evaluation.results.get("checks", [])}


def test_the_loop_on_a_real_vllm(
    make_fleet: Any,
    celery_worker: Any,
    operator: Any,
    approver: Any,
    real_env: environment.RealEnv,
    trained_models: dict[str, Any],
    tmp_path: Path,
) -> None:
    began = time.monotonic()
    timings: dict[str, Any] = {"training": trained_models["seconds"]}
    good_dir = Path(trained_models["models"]["good"]["path"])
    bad_dir = Path(trained_models["models"]["bad"]["path"])
    assert trained_models["five_token_prompt_tokens"] == 5

    fleet = make_fleet(1, time_scale=1.0)
    fleet.stop_unit(HOST)  # the simulated Kimi unit it boots with: not this test's
    fleet.remove_unit_file(HOST, "vllm-kimi-k25.service", reload=True)
    runtime = tmp_path / "real-engine"
    engine = real_engine.RealEngine(
        vllm=real_env.vllm,
        models={str(good_dir): good_dir, str(bad_dir): bad_dir},
        runtime=runtime,
        environment=server.server_environment(runtime),
    )
    fleet._call(lambda: real_engine.attach(fleet._machine(HOST), engine))
    key = "sk-loop-" + secrets.token_urlsafe(18)
    fleet.write_file(HOST, ENV_FILE, f"VLLM_API_KEY={key}\n")

    registered = register(fleet)
    Deployment.objects.filter(host=registered.host(HOST)).delete()  # the simulated Kimi unit's
    good = artifact("tiny/good", good_dir)
    bad = artifact("tiny/bad", bad_dir)
    fleet.set_unit_file(HOST, UNIT, unit_text(good), reload=True)
    fleet.start_unit(HOST, UNIT)
    started = time.monotonic()
    host = registered.host(HOST)
    deployment = Deployment(
        host=host, unit=UNIT, model=good, tensor_parallel_size=1, max_model_len=MAX_MODEL_LEN,
        port=PORT, bind_address="127.0.0.1", extra_args=EXTRA_ARGS,
    )  # fmt: skip
    deployment.full_clean()
    deployment.save()
    _install_sudoers(fleet, host)
    try:
        _loop(fleet, engine, host, deployment, good, bad, operator, approver, timings, started)
    finally:
        fleet._call(lambda: real_engine.detach(fleet._machine(HOST)))
        starts = [
            f"{Path(s.argv[2]).name} healthy after "
            + (f"{s.healthy - s.started:.0f} s" if s.healthy else "never")
            for s in engine.starts
        ]
        timings["test"] = round(time.monotonic() - began, 1)
        print(f"\nreal-engine loop: {timings}; starts: {starts}")


def _loop(fleet, engine, host, deployment, good, bad, operator, approver, timings, started):  # type: ignore[no-untyped-def]
    # --- the probe sees the real server, with its key read on the host ----------------------
    first = serving(host, "tiny/good")
    timings["first start (to a healthy probe)"] = round(time.monotonic() - started, 1)
    state = first.state()
    server_state = state.server(UNIT)
    assert server_state.models == ["tiny/good"]
    assert server_state.model_roots == [good.path]
    assert server_state.max_model_len == MAX_MODEL_LEN  # from the real /v1/models
    assert server_state.health_http_status == 200
    assert state.unit_state(UNIT).active_state == "active"

    # --- a swap to the bad model: the suite fails on the real engine, and it rolls back -----
    change = wait_for_change(swap(operator, approver, deployment, bad), timeout=JOB_TIMEOUT)
    timings["failed swap and rollback: job"] = job_seconds(change)
    timings["failed swap and rollback: health waits"] = step_seconds(change, "wait")
    assert change.status == ChangeStatus.ROLLED_BACK, (change.status, change.status_reason)
    before, after_bad, after_rollback = _three_suites(change)
    assert before.passed, before.summary  # the good model, before anything was touched
    assert not after_bad.passed, after_bad.summary
    said = outcomes(after_bad)
    for name in ("factual", "arithmetic", "multi-turn chat", "five-token prompt"):
        assert said[name] == "failed", (name, after_bad.results)
    assert said["greedy determinism"] == "passed"  # wrong, but the same wrong twice
    assert said["same answers as before"] == "failed"  # regressions against `before`
    answers = {r["name"]: r["answer"] for r in after_bad.results["checks"]}
    assert "Berlin" in answers["factual"] and "Beijing" in answers["five-token prompt"]
    assert after_rollback.passed, after_rollback.summary
    assert outcomes(after_rollback)["factual"] == "passed"
    long_context = next(r for r in before.results["checks"] if r["kind"] == "long_context")
    assert long_context["outcome"] == "passed", long_context  # filler fitted to 512 tokens
    assert long_context["max_model_len"] == MAX_MODEL_LEN
    five = next(r for r in before.results["checks"] if r["name"] == "five-token prompt")
    assert five["outcome"] == "passed" and five["prompt_tokens"] == 5, five
    names = [n for n, _ in steps(change)]
    assert any("restart" in n for n in names), names
    deployment.refresh_from_db()
    assert deployment.model == good
    assert deployment.current_revision == change.from_revision
    rolled = probe(host).state().server(UNIT)
    assert rolled.healthy and rolled.models == ["tiny/good"], rolled

    # --- a swap that succeeds, with the serving benchmark before and after -----------------
    second = artifact("tiny/good-2", Path(good.path))
    second.served_name = "tiny/good-2"
    second.save()
    profile = BenchmarkProfile.objects.create(
        name="tiny", concurrency_levels=[1, 2], input_tokens=32, output_tokens=16,
        requests_per_stream=2,
    )  # fmt: skip
    change = wait_for_change(
        swap(operator, approver, deployment, second, benchmark_profile=profile),
        timeout=JOB_TIMEOUT,
    )
    timings["benchmarked swap: job"] = job_seconds(change)
    assert change.status == ChangeStatus.SUCCEEDED, (change.status, change.status_reason)
    benchmarks = list(Evaluation.objects.filter(change=change, kind="benchmark").order_by("pk"))
    assert [b.phase for b in benchmarks] == ["baseline", "after"], benchmarks
    for run in benchmarks:
        assert run.passed, run.summary
    final = change.after_snapshot.state().server(UNIT)
    assert final.healthy and final.models == ["tiny/good-2"], final
    assert final.model_roots == [good.path]
    deployment.refresh_from_db()
    assert deployment.model == second
    assert deployment.current_revision == change.target_revision
    assert real_engine.process_of(fleet._machine(HOST), UNIT) is not None
    assert len(engine.starts) == 4, [s.argv for s in engine.starts]


def _three_suites(change: ChangeRequest) -> tuple[Evaluation, Evaluation, Evaluation]:
    found = suites(change)
    assert [e.phase for e in found] == ["baseline", "after", "restore"], [
        (e.phase, e.summary) for e in found
    ]
    return found[0], found[1], found[2]


def _install_sudoers(fleet: Any, host: Host) -> None:
    from hosts.sudoers import SUDOERS_PATH, EngineInstall, sudoers_entry
    from simulator import catalog

    engines = [
        EngineInstall(d.engine_python, catalog.VLLM_VERSION, d.engine_dist, "")
        for d in host.deployments.all()
    ]
    entry = sudoers_entry(user=host.username, environment_files=[ENV_FILE], engines=engines)
    fleet.write_file(host.name, SUDOERS_PATH, entry)
