"""The simulator held to what a real vLLM 0.32 answered (tests/real_engine/captures/*.json).

Each test serves what the real-engine tier served (the same served name, max_model_len 1024,
an API key, the deepseek_v3 reasoning parser, --enforce-eager), asks the simulated server what
the real one was asked, and compares what comes back the way the captures were written: ids,
times, fingerprints and generated words replaced (`captures.normalise`), so the rest must match
exactly, or, where token counts differ by nature (the simulator's tokenizer is not the random
model's), match in shape: the same keys, each with a value of the same JSON type.
"""

from __future__ import annotations

import http.client
import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from hosts import commands
from simulator import catalog
from simulator.http import routes
from tests.fleet import FleetHandle
from tests.real_engine import captures
from tests.real_engine.test_server import metric_families

UNIT = catalog.DEFAULT_UNIT
SERVED = "tiny/llama-test"  # the capture's served name, so normalised bodies compare as they are
KEY = "sk-test-parity-key"
MODEL = catalog.DEFAULT_MODEL.path


def _unit_text() -> str:
    return catalog.unit_file_text(
        served_name=SERVED,
        max_model_len=1024,
        host="127.0.0.1",
        extra_args=("--api-key", KEY, "--reasoning-parser", "deepseek_v3", "--enforce-eager"),
    )


@pytest.fixture
def real_like(make_fleet: Callable[..., FleetHandle]) -> FleetHandle:
    """One simulated host serving as the real-engine tier's server was configured."""
    fleet = make_fleet(1)
    fleet.set_unit_file("gpu-01", UNIT, _unit_text(), reload=True)
    fleet.restart_unit("gpu-01", UNIT)
    fleet.wait_for_unit("gpu-01", UNIT, "ready", timeout=10)
    return fleet


class Answer:
    def __init__(self, response: http.client.HTTPResponse) -> None:
        self.status = response.status
        self.headers = {k.lower(): v for k, v in response.getheaders()}
        self.body = response.read()

    @property
    def content_type(self) -> str | None:
        return self.headers.get("content-type")

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[Any]:
        """A stream's events: each chunk's JSON, and "[DONE]" as the string it is."""
        raw = [e.removeprefix("data: ") for e in self.body.decode().split("\n\n") if e]
        return [e if e == "[DONE]" else json.loads(e) for e in raw]


def call(
    fleet: FleetHandle, method: str, path: str, body: Any = None, *, key: str | None = KEY
) -> Answer:
    conn = http.client.HTTPConnection("127.0.0.1", fleet.http_port, timeout=10)
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    data = None if body is None else json.dumps(body)
    conn.request(method, f"/sim/gpu-01/8000{path}", data, headers)
    try:
        return Answer(conn.getresponse())
    finally:
        conn.close()


def shape(value: Any) -> Any:
    """A JSON value's shape: each key kept, each leaf its type; a list by its first item."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if value is None:
        return None
    return type(value).__name__


def normalised(value: Any, *, words: bool = True) -> Any:
    return captures.normalise(value, words=words)


def _events(fleet: FleetHandle, path: str, body: dict[str, Any]) -> list[Any]:
    answer = call(fleet, "POST", path, {**body, "stream": True})
    assert answer.status == 200, answer.body
    assert (answer.content_type or "").startswith("text/event-stream")
    return [e if e == "[DONE]" else normalised(e) for e in answer.events()]


# --- request validation (errors.json) -----------------------------------------------------


def test_what_cannot_fit_the_context_is_refused_with_vllms_status_and_body(
    real_like: FleetHandle,
) -> None:
    recorded = captures.read("errors")
    asked = {
        "max_tokens_5000": ("/v1/completions", {"prompt": "Hi", "max_tokens": 5000}),
        "max_tokens_10_000_000": ("/v1/completions", {"prompt": "Hi", "max_tokens": 10_000_000}),
        "prompt_too_long": ("/v1/completions", {"prompt": "gpu " * 1224, "max_tokens": 4}),
        "chat_max_tokens_5000": (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5000},
        ),
        "unknown_model": (
            "/v1/completions",
            {"model": "no/such-model", "prompt": "Hi", "max_tokens": 1},
        ),
    }
    for name, (path, body) in asked.items():
        answer = call(real_like, "POST", path, {"model": SERVED, **body})
        seen = {"status": answer.status, "content_type": answer.content_type, "body": answer.json()}
        assert seen == recorded[name], name


# --- health, ping, load, the routes there are (health.json, journal.json) ------------------


def test_health_and_ping_answer_200_with_no_body_and_no_content_type(
    real_like: FleetHandle,
) -> None:
    recorded = captures.read("health")
    health = call(real_like, "GET", "/health", key=None)
    assert {
        "status": health.status,
        "content_type": health.content_type,
        "body": health.body.decode(),
        "content_length": health.headers.get("content-length"),
    } == recorded["health"]
    for name, method in (("ping_get", "GET"), ("ping_post", "POST")):
        ping = call(real_like, method, "/ping", {} if method == "POST" else None, key=None)
        seen = {
            "status": ping.status,
            "content_type": ping.content_type,
            "body": ping.body.decode(),
        }
        assert seen == recorded[name], name
    load = call(real_like, "GET", "/load", key=None)
    seen = {"status": load.status, "content_type": load.content_type, "body": load.json()}
    assert seen == recorded["load"]


def test_a_loading_server_refuses_connections_and_never_answers_503(
    make_fleet: Callable[..., FleetHandle],
) -> None:
    recorded = captures.read("health")["health_while_starting"]
    fleet = make_fleet(1, load_seconds=1.0)
    fleet.set_unit_file("gpu-01", UNIT, _unit_text(), reload=True)
    fleet.restart_unit("gpu-01", UNIT)
    seen: list[str | int] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        out, _, status = fleet.run("gpu-01", commands.join(commands.http_get(8000, "/health")))
        code = int(out.rsplit(commands.HTTP_MARK, 1)[1])
        answer: str | int = "refused" if status == 7 and code == 0 else code
        if not seen or seen[-1] != answer:
            seen.append(answer)
        if answer == 200:
            break
        time.sleep(0.1)
    assert seen == recorded  # ["refused", 200]: each change once


def test_the_simulator_answers_only_routes_vllm_has_and_404_elsewhere(
    real_like: FleetHandle,
) -> None:
    listed = captures.read("journal")["routes"]
    real = {(r["path"], method) for r in listed for method in r["methods"].split(", ")}
    assert set(routes.ROUTE_TABLE) <= real, set(routes.ROUTE_TABLE) - real
    # The routes the product and operators reach for are all there.
    for wanted in ("/ping", "/load", "/invocations", "/tokenize", "/detokenize", "/version"):
        assert wanted in routes.ROUTES, wanted
    for path in ("/v1/embeddings", "/nope", "/v1"):
        missing = call(real_like, "GET", path)
        assert (missing.status, missing.json()) == (404, {"detail": "Not Found"}), path


# --- the API key (auth.json) ----------------------------------------------------------------


# What the real-engine test sent to each route without a key (tests/real_engine/test_server.py).
_ROUTE_BODIES: dict[str, Any] = {
    "POST /v1/completions": {"model": SERVED, "prompt": "Hi", "max_tokens": 1},
    "POST /v1/chat/completions": {
        "model": SERVED,
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 1,
    },
    "POST /ping": {},
    "POST /tokenize": {"model": SERVED, "prompt": "Hi"},
    "POST /detokenize": {"model": SERVED, "tokens": [5, 6]},
    "POST /invocations": {"model": SERVED, "prompt": "Hi", "max_tokens": 1},
}


def test_the_key_guards_what_vllm_guards_and_401_says_what_it_says(
    real_like: FleetHandle,
) -> None:
    recorded = captures.read("auth")
    without_key = {}
    for route in recorded["status_without_key"]:
        method, path = route.split(" ", 1)
        without_key[route] = call(
            real_like, method, path, _ROUTE_BODIES.get(route), key=None
        ).status
    assert without_key == recorded["status_without_key"]
    for name, key in (("models_without_key", None), ("models_with_wrong_key", "not-the-key")):
        answer = call(real_like, "GET", "/v1/models", key=key)
        seen = {"status": answer.status, "content_type": answer.content_type, "body": answer.json()}
        assert seen == recorded[name], name
    models = call(real_like, "GET", "/v1/models")
    seen = {
        "status": models.status,
        "content_type": models.content_type,
        "body": normalised(models.json()),
    }
    assert seen == recorded["models_with_key"]


def test_invocations_serve_a_completion_or_a_chat_without_the_key(real_like: FleetHandle) -> None:
    recorded = captures.read("invocations")
    asked = {
        "completion_without_key": {"prompt": "The capital of France is", "max_tokens": 4},
        "chat_without_key": {
            "messages": [{"role": "user", "content": "What is two plus two?"}],
            "max_tokens": 4,
        },
    }
    for name, body in asked.items():
        answer = call(real_like, "POST", "/invocations", {"model": SERVED, **body}, key=None)
        want = recorded[name]
        assert (answer.status, answer.content_type) == (want["status"], want["content_type"])
        assert shape(normalised(answer.json())) == shape(want["body"]), name
        assert answer.json()["object"] == want["body"]["object"]


# --- tokens (tokenize.json) -----------------------------------------------------------------


def test_tokenize_answers_in_vllms_shape_with_and_without_the_key(real_like: FleetHandle) -> None:
    recorded = captures.read("tokenize")
    prompt = recorded["prompt"]
    asked = {
        "prompt_answer": ({"prompt": prompt}, KEY),
        "without_special_tokens": (
            {"prompt": prompt, "add_special_tokens": False, "return_token_strs": True},
            KEY,
        ),
        "chat_messages": ({"messages": [{"role": "user", "content": prompt}]}, KEY),
        "without_key": ({"prompt": prompt}, None),
    }
    for name, (body, key) in asked.items():
        answer = call(real_like, "POST", "/tokenize", {"model": SERVED, **body}, key=key)
        want = recorded[name]
        assert (answer.status, answer.content_type) == (want["status"], want["content_type"])
        assert shape(answer.json()) == shape(want["body"]), name
        assert answer.json()["max_model_len"] == want["body"]["max_model_len"]


# --- streams (completion-stream.json, chat-stream.json) ---------------------------------------


def test_a_completion_chunk_of_a_token_ending_inside_a_character_is_vllms(
    real_like: FleetHandle,
) -> None:
    recorded = captures.read("completion-stream")
    forced = recorded["forced"]
    # "°" is two byte tokens here: the first streams with text "", as the capture's all do.
    body = {"model": SERVED, "prompt": "What is the degree sign?", "temperature": 0}
    one = _events(real_like, "/v1/completions", {**body, "max_tokens": 1})
    assert one == [forced[-2], "[DONE]"]  # one token, the last: finish_reason, fingerprint
    two = _events(real_like, "/v1/completions", {**body, "max_tokens": 2})
    assert two[0] == forced[0]  # not the last: no fingerprint, no finish_reason
    assert len(two) == 3 and two[-1] == "[DONE]"


def test_completion_streams_and_answers_have_vllms_keys(real_like: FleetHandle) -> None:
    recorded = captures.read("completion-stream")
    body = {"model": SERVED, "prompt": "The capital of France is", "temperature": 0}
    with_usage = _events(
        real_like,
        "/v1/completions",
        {**body, "max_tokens": 6, "stream_options": {"include_usage": True}},
    )
    want = recorded["with_usage"]
    assert [shape(e) for e in with_usage] == [shape(e) for e in want]
    assert with_usage[-2]["choices"] == [] and with_usage[-2]["usage"]["completion_tokens"] == 6
    whole = call(real_like, "POST", "/v1/completions", {**body, "max_tokens": 4})
    assert shape(normalised(whole.json(), words=False)) == shape(
        recorded["forced_not_streamed"]["body"]
    )


def _stream_outline(events: list[Any]) -> list[Any]:
    """A chat stream's opening chunk, a middle one, the last token's, the usage chunk if any,
    and [DONE], each by its shape: what holds whatever the number of tokens."""
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    usage = [shape(chunks.pop())] if chunks[-1]["choices"] == [] else []
    return [shape(chunks[0]), shape(chunks[1]), shape(chunks[-1]), *usage, "[DONE]"]


def test_chat_streams_carry_reasoning_and_content_as_vllm_0_32_does(
    real_like: FleetHandle,
) -> None:
    recorded = captures.read("chat-stream")
    messages = [{"role": "user", "content": "What is two plus two?"}]
    base = {"model": SERVED, "messages": messages, "max_tokens": 5, "temperature": 0}
    thinking_ask = {**base, "chat_template_kwargs": {"enable_thinking": True}}
    thinking = _events(real_like, "/v1/chat/completions", thinking_ask)
    plain = _events(
        real_like,
        "/v1/chat/completions",
        {**base, "stream_options": {"include_usage": True}},
    )
    assert _stream_outline(thinking) == _stream_outline(recorded["thinking"])
    assert _stream_outline(plain) == _stream_outline(recorded["plain"])
    # No reasoning_content anywhere, no empty tool_calls: exactly the capture's keys.
    for events in (thinking, plain):
        assert "reasoning_content" not in json.dumps(events)
        assert "tool_calls" not in json.dumps(events)
    for name, ask in (("thinking_not_streamed", thinking_ask), ("plain_not_streamed", base)):
        whole = call(real_like, "POST", "/v1/chat/completions", ask)
        assert shape(normalised(whole.json())) == shape(recorded[name]["body"]), name


# --- /metrics (metrics.json) ----------------------------------------------------------------

# The families the product reads (hosts.parsers.http) and the common ones the real-engine test
# checks; each must be there with vLLM's type, sample names and label order.
PRODUCT_FAMILIES = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
)
COMMON_FAMILIES = (
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:request_success_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:num_preemptions_total",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:cache_config_info",
)


def test_metric_families_types_and_label_order_are_vllms(real_like: FleetHandle) -> None:
    recorded = captures.read("metrics")
    call(
        real_like, "POST", "/v1/completions", {"model": SERVED, "prompt": "Hello", "max_tokens": 3}
    )
    answer = call(real_like, "GET", "/metrics", key=None)
    assert answer.status == 200
    assert answer.content_type == recorded["content_type"]
    text = answer.body.decode()
    families = metric_families(text)
    real = recorded["families"]
    for name in (*PRODUCT_FAMILIES, *COMMON_FAMILIES):
        assert families.get(name) == real[name], name
    # Every family the simulator shows, vLLM has, in the same form (its _created gauges too).
    for name, family in families.items():
        assert family == real.get(name), name
    assert sorted(set(re.findall(r'\bmodel_name="([^"]*)"', text))) == [SERVED]
    assert (
        sorted(set(re.findall(r'\bengine="([^"]*)"', text))) == recorded["label_values"]["engine"]
    )


# --- the journal (journal.json) -------------------------------------------------------------

_ROUTE = re.compile(r"Route: (\S+), Methods: (.*)$")


def _journal(fleet: FleetHandle) -> list[str]:
    replacements = {MODEL: "<model dir>", KEY: "<api key>"}
    return [captures.normalise_log_line(line, replacements) for line in fleet.journal("gpu-01")]


def test_startup_lines_are_vllm_0_32s(real_like: FleetHandle) -> None:
    recorded = captures.read("journal")
    everything = _journal(real_like)
    # The banner, line for line (the capture's first line is Triton on a CPU build); the
    # server's latest start (the fixture restarted it with the capture's arguments).
    banner = recorded["first_lines"][1:7]
    logo = max(i for i, line in enumerate(everything) if line == banner[1])
    lines = everything[logo - 1 :]
    start = 0
    version = f"version {catalog.VLLM_VERSION}"
    assert [line.replace(version, "version 0.32.0") for line in lines[start : start + 6]] == banner
    # Then the non-default args, from where vLLM 0.32 logs them, the key masked.
    (args,) = [line for line in lines if "non-default args:" in line]
    assert (
        args.split(" non-default args: ")[0]
        == recorded["non_default_args"].split(" non-default args: ")[0]
    )
    assert lines.index(args) == start + 6
    assert "'api_key': '***'" in args and KEY not in "\n".join(real_like.journal("gpu-01"))
    for line in ("Resolved architecture: ", "Using max model len 1024"):
        where = next(r for r in recorded["first_lines"] if line in r).split("] ")[0]
        assert any(s.startswith(where + "] " + line) for s in lines), line
    # The start line, the routes it lists, and uvicorn's own lines, which carry no prefix.
    assert recorded["starting"] in lines
    listed = [m.group(1) + " " + m.group(2) for line in lines if (m := _ROUTE.search(line))]
    real = [f"{r['path']} {r['methods']}" for r in recorded["routes"]]
    assert listed == [r for r in real if r in listed] and len(listed) == len(routes.ROUTE_TABLE)
    assert [line for line in lines if line.startswith("INFO:     ")] == recorded["uvicorn_lines"]
    assert lines.index(recorded["starting"]) < lines.index(recorded["uvicorn_lines"][0])


def test_shutdown_lines_are_uvicorns_own(real_like: FleetHandle) -> None:
    before = len(real_like.journal("gpu-01"))
    real_like.stop_unit("gpu-01", UNIT)
    real_like.wait_for_unit("gpu-01", UNIT, "stopped", timeout=10)
    after = _journal(real_like)[before:]
    uvicorn = [line for line in after if line.startswith("INFO:     ")]
    assert uvicorn == [
        "INFO:     Shutting down",
        "INFO:     Waiting for application shutdown.",
        "INFO:     Application shutdown complete.",
        "INFO:     Finished server process [<pid>]",
    ]
    assert not any("(APIServer pid=<pid>) INFO:" in line for line in after)


@pytest.mark.xfail(
    strict=True,
    reason="simulator/vllm_cli/process_names.py still names a single engine core "
    "EngineCore_DP0 (vLLM 0.11); vLLM 0.32 says EngineCore unless data-parallel",
)
def test_the_engine_cores_log_prefix_is_vllm_0_32s(real_like: FleetHandle) -> None:
    recorded = captures.read("journal")
    prefixes = {m.group(1) for line in _journal(real_like) if (m := re.match(r"^\((\S+) ", line))}
    cores = {p for p in prefixes if p.startswith("EngineCore")}
    assert cores and cores <= set(recorded["log_prefixes"])
