"""The simulated servers at their modelled pace: the product's benchmark client, run for real on a
simulated host, against the fleet's streaming HTTP server; and the host's curl waiting too."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from deployments.host_scripts import SERVING_BENCH, parse_bench_output, serving_bench_argv
from hosts import commands
from simulator import catalog, scheduler
from simulator.http import loopback
from simulator.tools import scripts
from tests.fleet import FleetHandle, ssh

UNIT = catalog.DEFAULT_UNIT
INT4 = "/models/moonshotai/Kimi-K2.5-INT4"
PYTHON = "/opt/vllm/.venv/bin/python3"
SCALE = 0.5  # twice as fast as real: the 64-stream benchmark takes ~4 s, and a loaded
# machine still keeps up with the ~4,400 tokens a second it then streams


def serve(fleet: FleetHandle, model_path: str, *extra: str, served: str = "kimi-k2.5") -> None:
    text = catalog.unit_file_text(model_path=model_path, served_name=served, extra_args=extra)
    fleet.set_unit_file("gpu-01", UNIT, text, reload=True)
    fleet.restart_unit("gpu-01", UNIT)
    fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=10)


def bench(fleet: FleetHandle, concurrency: int, *, prefix: str = "", **kw: Any) -> dict[str, Any]:
    argv = serving_bench_argv(
        PYTHON,
        port=kw.pop("port", 8000),
        model=kw.pop("model", "kimi-k2.5"),
        concurrency=concurrency,
        num_requests=kw.pop("num_requests", concurrency),
        input_tokens=kw.pop("input_tokens", 128),
        output_tokens=kw.pop("output_tokens", 256),
        **kw,
    )
    out, err, status = fleet.run("gpu-01", prefix + commands.join(argv), stdin=SERVING_BENCH)
    assert status == 0, err
    parse_bench_output(out)  # the product's parser accepts it
    result: dict[str, Any] = json.loads(out)
    return result


@pytest.fixture
def fast_fleet(make_fleet: Callable[..., FleetHandle]) -> FleetHandle:
    return make_fleet(1, time_scale=SCALE)


@pytest.mark.realtime
def test_the_client_measures_the_calibration_points(fast_fleet: FleetHandle) -> None:
    serve(fast_fleet, INT4)
    one = bench(fast_fleet, 1)
    many = bench(fast_fleet, 64)
    # The client measures real seconds; the host's are twice as long.
    assert one["errors"] == many["errors"] == 0
    assert 82 * 0.9 <= one["output_tok_s"] * SCALE <= 82 * 1.1
    assert 82 * 0.9 <= 1000 / (one["tpot_ms"]["mean"] / SCALE) <= 82 * 1.1
    assert 2200 * 0.9 <= many["output_tok_s"] * SCALE <= 2200 * 1.1
    expected = scheduler.estimate(INT4, concurrency=64)
    # The median stream: on a loaded machine a few streams wait for the CPU, which the mean
    # would charge to the model.
    assert 1000 / (many["tpot_ms"]["p50"] / SCALE) == pytest.approx(
        expected.per_stream_tok_s, rel=0.1
    )
    assert many["ttft_ms"]["mean"] > 5 * one["ttft_ms"]["mean"]  # queueing behind prompts
    assert many["output_tokens"] == 64 * 256 and many["input_tokens"] == 64 * 128


def test_streams_are_server_sent_events(fast_fleet: FleetHandle) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", fast_fleet.http_port, timeout=10)
    body = {
        "model": "kimi-k2.5",
        "prompt": "The capital of France is",
        "max_tokens": 6,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    conn.request("POST", "/sim/gpu-01/8000/v1/completions", json.dumps(body))
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("transfer-encoding") == "chunked"
    assert response.getheader("content-type").startswith("text/event-stream")
    events = [e for e in response.read().decode().split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    assert text == " Paris. It is the largest"
    assert [c["usage"]["completion_tokens"] for c in chunks] == [1, 2, 3, 4, 5, 6, 6]
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] == 5
    # The same connection carries the next request: chat, not streamed.
    chat = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
    conn.request("POST", "/sim/gpu-01/8000/v1/chat/completions", json.dumps(chat))
    answer = json.loads(conn.getresponse().read())
    assert answer["choices"][0]["message"]["content"] == "Hello! How can"
    conn.request("GET", "/sim/gpu-01/localhost:8000/v1/models")
    assert json.loads(conn.getresponse().read())["data"][0]["id"] == "kimi-k2.5"
    conn.request("GET", "/sim/gpu-01/8000/nope")
    assert conn.getresponse().status == 404
    conn.close()


def test_curl_completions_take_ttft_plus_tokens_times_tpot(
    make_fleet: Callable[..., FleetHandle],
) -> None:
    fleet = make_fleet(1, time_scale=0.5)
    body = json.dumps({"prompt": "Tell me about the weather", "max_tokens": 40, "ignore_eos": True})
    started = time.monotonic()
    out, _, status = fleet.run("gpu-01", commands.join(commands.completion_request(8000, body)))
    took = time.monotonic() - started
    payload, code = out.rsplit("\n@@cp:http:", 1)
    assert status == 0 and code == "200\n"
    assert json.loads(payload)["usage"] == {
        "prompt_tokens": 5,
        "total_tokens": 45,
        "completion_tokens": 40,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }
    # Kimi-K2.5 NVFP4 alone: ~45 tok/s, so 40 tokens are ~0.9 host seconds, 0.45 real ones.
    expected = scheduler.estimate(
        catalog.DEFAULT_MODEL.path, input_tokens=5, output_tokens=40
    ).e2el_s
    assert expected * 0.5 <= took <= expected * 0.5 * 1.5 + 0.1
    # curl -m is in host seconds: a 0.2 s limit is hit long before 40 tokens.
    argv = commands.completion_request(8000, body, max_seconds=1)
    argv[argv.index("-m") + 1] = "0.2"
    out, _, status = fleet.run("gpu-01", commands.join(argv))
    assert status == 28 and "000" in out


def test_the_api_key_and_the_environment_of_a_script(fast_fleet: FleetHandle) -> None:
    serve(fast_fleet, catalog.DEFAULT_MODEL.path, "--api-key=s3cr3t-key")
    refused = bench(fast_fleet, 2, output_tokens=4, api_key_env="VLLM_API_KEY")
    assert refused["errors"] == 2 and refused["error_samples"] == ["HTTP 401: Unauthorized"]
    ok = bench(
        fast_fleet,
        2,
        output_tokens=4,
        api_key_env="VLLM_API_KEY",
        prefix="VLLM_API_KEY=s3cr3t-key ",
    )
    assert ok["completed"] == 2


def test_a_stopped_server_refuses_and_a_dying_one_resets(fast_fleet: FleetHandle) -> None:
    fast_fleet.stop_unit("gpu-01", UNIT)
    down = bench(fast_fleet, 2, output_tokens=4)
    assert down["errors"] == 2 and "Connection refused" in down["error_samples"][0]
    fast_fleet.start_unit("gpu-01", UNIT)
    fast_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=10)
    conn = http.client.HTTPConnection("127.0.0.1", fast_fleet.http_port, timeout=10)
    body = {"prompt": "hello", "max_tokens": 400, "ignore_eos": True, "stream": True}
    conn.request("POST", "/sim/gpu-01/8000/v1/completions", json.dumps(body))
    response = conn.getresponse()
    assert response.status == 200
    response.readline()  # the first event: it streams
    fast_fleet.stop_unit("gpu-01", UNIT)
    with pytest.raises((ConnectionError, http.client.IncompleteRead)):
        response.read()
    conn = http.client.HTTPConnection("127.0.0.1", fast_fleet.http_port, timeout=10)
    conn.request("GET", "/sim/gpu-01/8000/health")
    with pytest.raises(ConnectionError):
        conn.getresponse()


def test_metrics_count_the_requests_in_flight(fast_fleet: FleetHandle) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", fast_fleet.http_port, timeout=10)
    body = {"prompt": "hello", "max_tokens": 300, "ignore_eos": True, "stream": True}
    conn.request("POST", "/sim/gpu-01/8000/v1/completions", json.dumps(body))
    response = conn.getresponse()
    response.readline()
    out, _, _ = fast_fleet.run("gpu-01", commands.join(commands.http_get(8000, "/metrics")))
    assert 'vllm:num_requests_running{engine="0",model_name="kimi-k2.5"} 1.0' in out
    conn.close()


def test_incoherent_streams_babble(fast_fleet: FleetHandle) -> None:
    fast_fleet.set_fault("gpu-01", "incoherent")
    conn = http.client.HTTPConnection("127.0.0.1", fast_fleet.http_port, timeout=10)
    body = {"prompt": "The capital of France is", "max_tokens": 8, "stream": True}
    conn.request("POST", "/sim/gpu-01/8000/v1/completions", json.dumps(body))
    text = conn.getresponse().read().decode()
    assert "Paris" not in text and any(s in text for s in ("blor", "zeph", "quint", "glox"))


# --- running scripts, and what is rewritten --------------------------------------------------


def test_loopback_urls_are_rewritten_to_the_fleet_server(fast_fleet: FleetHandle) -> None:
    server = loopback.server_for(fast_fleet.fleet.host("gpu-01").machine)
    assert server is not None
    base, refused = f"http://127.0.0.1:{server.port}", f"http://127.0.0.1:{server.refusing_port}"

    def rewrite(arg: str) -> str:
        return fast_fleet._call(lambda: scripts.rewrite(arg, "gpu-01", server))

    assert rewrite("http://127.0.0.1:8000") == f"{base}/sim/gpu-01/8000"
    assert rewrite("--url=http://localhost:8000/v1") == f"--url={base}/sim/gpu-01/localhost:8000/v1"
    assert rewrite("http://127.0.0.1:9000/x") == f"{refused}/sim/gpu-01/9000/x"  # nobody there
    assert rewrite("http://127.0.0.1") == f"{refused}/sim/gpu-01/80"
    for unchanged in ("https://127.0.0.1:8000", "http://10.0.0.5:8000", "http://127.0.0.10:8000"):
        assert rewrite(unchanged) == unchanged


def test_scripts_on_stdin_run_for_real(fast_fleet: FleetHandle) -> None:
    script = (
        "import os, sys\n"
        "print(sys.argv[1:], os.environ.get('GREETING'))\n"
        "print('to stderr', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    result = ssh(
        fast_fleet,
        "gpu-01",
        f"GREETING=hi {PYTHON} -I - --url http://127.0.0.1:8000 x",
        stdin=script,
    )
    port = fast_fleet.http_port
    assert result.stdout == f"['--url', 'http://127.0.0.1:{port}/sim/gpu-01/8000', 'x'] hi\n"
    assert result.stderr == "to stderr\n" and result.exit_status == 3
    # The control plane's integrity script stays emulated, whichever way it arrives.
    integrity = commands.INTEGRITY_SCRIPT
    out, _, status = fast_fleet.run("gpu-01", f"{PYTHON} -I - vllm", stdin=integrity)
    assert status == 0 and json.loads(out)["dist"] == "vllm"
    out, err, status = fast_fleet.run("gpu-01", f"{PYTHON} -I -c 'print(1)'")
    assert status == 1 and "integrity check, pip, and scripts on stdin" in err


def test_a_script_that_runs_too_long_is_killed(
    fast_fleet: FleetHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scripts, "SCRIPT_TIMEOUT_SECONDS", 0.5)
    started = time.monotonic()
    _, err, status = fast_fleet.run("gpu-01", f"{PYTHON} -", stdin="import time\ntime.sleep(30)\n")
    assert status == 137 and "killed" in err and time.monotonic() - started < 5


# --- what vLLM 0.32 showed: empty-text chunks, reasoning, /tokenize, the context's limits ------


def post(fleet: FleetHandle, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", fleet.http_port, timeout=10)
    conn.request("POST", f"/sim/gpu-01/8000{path}", json.dumps(body))
    response = conn.getresponse()
    raw = response.read().decode()
    conn.close()
    if response.getheader("content-type", "").startswith("text/event-stream"):
        events = [e.removeprefix("data: ") for e in raw.split("\n\n") if e]
        return response.status, [json.loads(e) for e in events if e != "[DONE]"]
    return response.status, json.loads(raw)


def test_a_token_ending_inside_a_character_streams_empty_text(fast_fleet: FleetHandle) -> None:
    body = {"prompt": "What is the degree sign?", "max_tokens": 4, "stream": True}
    status, chunks = post(fast_fleet, "/v1/completions", body)
    assert status == 200
    texts = [c["choices"][0]["text"] for c in chunks if c["choices"]]
    # "°" is two UTF-8 bytes, two tokens: the first carries no text, as vLLM streams it.
    assert texts[0] == "" and "".join(texts).startswith(" °")
    assert len("".join(texts)) < 4 * 4  # four tokens, the first of them empty
    status, answer = post(fast_fleet, "/v1/completions", {**body, "stream": False})
    assert answer["usage"]["completion_tokens"] == 4 and answer["choices"][0]["text"][:2] == " °"


def test_tokenize_counts_what_usage_counts(fast_fleet: FleetHandle) -> None:
    prompt = "The capital of France is 100 °C."
    status, counted = post(fast_fleet, "/tokenize", {"model": "kimi-k2.5", "prompt": prompt})
    assert status == 200
    assert set(counted) == {"count", "max_model_len", "tokens", "token_strs"}
    assert counted["count"] == len(counted["tokens"]) == 10  # ° is two byte tokens
    assert counted["max_model_len"] == catalog.DEFAULT_MODEL.max_model_len
    _, answer = post(fast_fleet, "/v1/completions", {"prompt": prompt, "max_tokens": 1})
    assert answer["usage"]["prompt_tokens"] == counted["count"]
    chat = {"messages": [{"role": "user", "content": "hello there"}]}
    assert post(fast_fleet, "/tokenize", chat)[1]["count"] == 2
    status, refused = post(fast_fleet, "/tokenize", {"model": "nope", "prompt": "x"})
    assert status == 404 and refused["error"]["type"] == "NotFoundError"


def test_what_cannot_fit_the_context_is_refused_as_vllm_refuses_it(
    fast_fleet: FleetHandle,
) -> None:
    text = catalog.unit_file_text(max_model_len=1024)
    fast_fleet.set_unit_file("gpu-01", UNIT, text, reload=True)
    fast_fleet.restart_unit("gpu-01", UNIT)
    fast_fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=10)
    status, refused = post(fast_fleet, "/v1/completions", {"prompt": "gpu " * 1224})
    assert status == 400 and refused == {
        "error": {
            "message": "This model's maximum context length is 1024 tokens. However, your "
            "prompt contains at least 1025 input tokens, which exceeds this limit even without "
            "any output tokens. Please reduce the length of the input prompt. "
            "(parameter=input_tokens, value=1025)",
            "type": "BadRequestError",
            "param": "input_tokens",
            "code": 400,
        }
    }
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10_000_000}
    status, refused = post(fast_fleet, "/v1/chat/completions", chat)
    assert status == 400 and refused["error"]["param"] == "max_tokens"
    assert refused["error"]["message"] == (
        "max_tokens=10000000 cannot be greater than max_model_len=1024. Please request fewer "
        "output tokens. (parameter=max_tokens, value=10000000)"
    )
    # What fits is answered, its output held to what the context leaves.
    body = {"prompt": "gpu " * 1000, "max_tokens": 1000, "ignore_eos": True}
    status, answer = post(fast_fleet, "/v1/completions", body)
    assert status == 200 and answer["usage"]["completion_tokens"] == 24


@pytest.mark.realtime
def test_a_reasoning_model_thinks_in_delta_reasoning_and_ttft_is_its_first_thought(
    fast_fleet: FleetHandle,
) -> None:
    serve(fast_fleet, catalog.DEFAULT_MODEL.path, "--reasoning-parser", "kimi_k2")
    chat = {"messages": [{"role": "user", "content": "What is the capital of Japan?"}]}
    status, chunks = post(fast_fleet, "/v1/chat/completions", {**chat, "stream": True})
    assert status == 200
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert set(deltas[1]) == {"reasoning"} and "content" in deltas[-1]
    assert "Tokyo" in "".join(d.get("content", "") for d in deltas)
    _, whole = post(fast_fleet, "/v1/chat/completions", chat)
    message = whole["choices"][0]["message"]
    assert message["reasoning"].startswith("The user asks") and "Tokyo" in message["content"]
    # The benchmark client's TTFT is the first thought, not the answer's first word (14
    # reasoning tokens later).
    out = bench(fast_fleet, 1, endpoint="chat", output_tokens=40, input_tokens=16)
    found = scheduler.estimate(catalog.DEFAULT_MODEL.path, input_tokens=16, output_tokens=40)
    assert out["completed"] == 1
    assert out["ttft_ms"]["p50"] < (found.ttft_s + 6 * found.tpot_s) * SCALE * 1000


def test_the_client_sizes_its_prompts_with_tokenize(fast_fleet: FleetHandle) -> None:
    out = bench(fast_fleet, 2, input_tokens=64, output_tokens=4)
    assert out["input_counted_by"] == "tokenize" and out["notes"] == []
    assert out["input_tokens_asked"] == 64
    assert out["input_tokens_sent"] == {"mean": 64.0, "min": 64, "max": 64}
    assert out["itl_per_token_ms"]["p50"] is not None
