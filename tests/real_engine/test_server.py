"""What a real vLLM 0.32 server answers, asserted and recorded as captures for the simulator.

One server for the whole module (conftest.py's ``real_vllm``), serving a random-weight tiny
Llama under the name ``tiny/llama-test`` with an API key, ``--max-model-len 1024`` and the
``deepseek_v3`` reasoning parser. The model's words are noise; the tests look at status codes,
bodies, shapes, metric names and log formats, never at what the model says.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.real_engine import captures
from tests.real_engine.server import MAX_MODEL_LEN, REASONING_PARSER, RealServer

pytestmark = [
    pytest.mark.real_engine,
    pytest.mark.xdist_group("real_engine"),
    # The first test's setup starts the server (and installs vLLM on a fresh machine).
    pytest.mark.timeout(900),
]


def _version(server: RealServer) -> str:
    return str(server.get("/version", key=None).json()["version"])


def _capture(server: RealServer, name: str, what: str, **facts: Any) -> None:
    captures.write(
        name,
        {
            "vllm_version": _version(server),
            "what": what,
            "server": {
                "served_model_name": server.served_name,
                "max_model_len": MAX_MODEL_LEN,
                "api_key": "set (--api-key)",
                "reasoning_parser": REASONING_PARSER,
                "model": "tiny random-weight Llama, byte-level BPE tokenizer trained locally",
            },
            **facts,
        },
    )


def _answer(response: Any, *, words: bool = True) -> dict[str, Any]:
    content_type = response.headers.get("content-type", "")
    body: Any
    if "json" in content_type:
        body = captures.normalise(response.json(), words=words)
    else:
        body = response.text
    return {"status": response.status, "content_type": content_type or None, "body": body}


# --- authentication -----------------------------------------------------------------------


def test_models_answers_401_without_the_key_and_lists_the_served_name_with_it(
    real_vllm: RealServer,
) -> None:
    without = real_vllm.get("/v1/models", key=None)
    wrong = real_vllm.get("/v1/models", key="not-the-key")
    with_key = real_vllm.get("/v1/models")

    assert without.status == 401
    assert without.json() == {"error": "Unauthorized"}
    assert wrong.status == 401
    assert with_key.status == 200
    listed = with_key.json()["data"]
    assert [model["id"] for model in listed] == [real_vllm.served_name]
    assert listed[0]["max_model_len"] == MAX_MODEL_LEN

    # Which routes the key guards: everything under /v1, nothing outside it (probed without a
    # key). /invocations serves completions without one (test below).
    routes = {
        ("GET", "/v1/models"): None,
        ("POST", "/v1/completions"): {
            "model": real_vllm.served_name,
            "prompt": "Hi",
            "max_tokens": 1,
        },
        ("POST", "/v1/chat/completions"): {
            "model": real_vllm.served_name,
            "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 1,
        },
        ("GET", "/health"): None,
        ("GET", "/ping"): None,
        ("POST", "/ping"): {},
        ("GET", "/version"): None,
        ("GET", "/load"): None,
        ("GET", "/metrics"): None,
        ("POST", "/tokenize"): {"model": real_vllm.served_name, "prompt": "Hi"},
        ("POST", "/detokenize"): {"model": real_vllm.served_name, "tokens": [5, 6]},
        ("POST", "/invocations"): {"model": real_vllm.served_name, "prompt": "Hi", "max_tokens": 1},
    }
    without_key = {
        f"{method} {path}": real_vllm.request(method, path, body, key=None).status
        for (method, path), body in routes.items()
    }
    assert without_key["POST /v1/completions"] == 401
    assert without_key["POST /v1/chat/completions"] == 401
    assert without_key["GET /health"] == 200
    assert without_key["GET /metrics"] == 200

    _capture(
        real_vllm,
        "auth",
        "Which routes answer without the API key (status per route, requests sent with no "
        "Authorization header), and /v1/models without, with a wrong, and with the right key.",
        status_without_key=without_key,
        models_without_key=_answer(without),
        models_with_wrong_key=_answer(wrong),
        models_with_key=_answer(with_key),
    )


def test_invocations_serves_completions_without_the_key(real_vllm: RealServer) -> None:
    completion = real_vllm.post(
        "/invocations",
        {"model": real_vllm.served_name, "prompt": "The capital of France is", "max_tokens": 4},
        key=None,
    )
    chat = real_vllm.post(
        "/invocations",
        {
            "model": real_vllm.served_name,
            "messages": [{"role": "user", "content": "What is two plus two?"}],
            "max_tokens": 4,
        },
        key=None,
    )

    assert completion.status == 200, completion.text
    assert completion.json()["object"] == "text_completion"
    assert completion.json()["usage"]["completion_tokens"] == 4
    assert chat.status == 200, chat.text
    assert chat.json()["object"] == "chat.completion"

    _capture(
        real_vllm,
        "invocations",
        "POST /invocations (the SageMaker-style route) without any Authorization header: a "
        "prompt body is served as a completion, a messages body as a chat completion.",
        completion_without_key=_answer(completion),
        chat_without_key=_answer(chat),
    )


# --- health -------------------------------------------------------------------------------


def test_health_and_ping_answer_with_empty_bodies_and_loading_refuses_connections(
    real_vllm: RealServer,
) -> None:
    health = real_vllm.get("/health", key=None)
    ping_get = real_vllm.get("/ping", key=None)
    ping_post = real_vllm.post("/ping", {}, key=None)
    load = real_vllm.get("/load", key=None)

    assert (health.status, health.body) == (200, b"")
    assert (ping_get.status, ping_get.body) == (200, b"")
    assert (ping_post.status, ping_post.body) == (200, b"")
    # What /health answered while the server started, each change once.
    while_starting = [status for _, status in real_vllm.notes["health_while_starting"]]
    assert while_starting[-1] == 200
    assert 503 not in while_starting, while_starting
    assert set(while_starting) <= {"refused", 200}, while_starting

    _capture(
        real_vllm,
        "health",
        "/health and /ping once up; what /health answered while the server was starting "
        "(polled every 0.5 s from the moment the process started, each change once).",
        health=_answer(health) | {"content_length": health.headers.get("content-length")},
        ping_get=_answer(ping_get),
        ping_post=_answer(ping_post),
        load=_answer(load),
        health_while_starting=while_starting,
    )


# --- tokens -------------------------------------------------------------------------------


def test_tokenize_counts_the_prompt_in_the_model_tokens(real_vllm: RealServer) -> None:
    prompt = "The capital of France is Paris."
    plain = real_vllm.post("/tokenize", {"model": real_vllm.served_name, "prompt": prompt})
    bare = real_vllm.post(
        "/tokenize",
        {
            "model": real_vllm.served_name,
            "prompt": prompt,
            "add_special_tokens": False,
            "return_token_strs": True,
        },
    )
    chat = real_vllm.post(
        "/tokenize",
        {"model": real_vllm.served_name, "messages": [{"role": "user", "content": prompt}]},
    )
    without_key = real_vllm.post(
        "/tokenize", {"model": real_vllm.served_name, "prompt": prompt}, key=None
    )

    assert plain.status == 200, plain.text
    counted = plain.json()
    assert counted["count"] == len(counted["tokens"])
    assert counted["max_model_len"] == MAX_MODEL_LEN
    # The BOS the tokenizer adds is counted; words are not tokens.
    assert bare.json()["count"] == counted["count"] - 1
    assert counted["count"] != len(prompt.split())
    assert len(bare.json()["token_strs"]) == bare.json()["count"]
    assert chat.json()["count"] > counted["count"]  # the chat template's own tokens

    _capture(
        real_vllm,
        "tokenize",
        "POST /tokenize with a prompt (with and without special tokens) and with chat "
        "messages; the token ids are those of the locally trained tokenizer.",
        prompt=prompt,
        words_in_prompt=len(prompt.split()),
        prompt_answer=_answer(plain),
        without_special_tokens=_answer(bare),
        chat_messages=_answer(chat),
        without_key=_answer(without_key),
    )


# --- streaming ----------------------------------------------------------------------------


def _lead_byte_token(real_vllm: RealServer) -> int:
    """A token that is the first part of a multi-byte character: generating only it, the text
    never completes a character, so every chunk's text is empty."""
    for char in ("✓", "→", "€", "✗"):
        answer = real_vllm.post(
            "/tokenize",
            {"model": real_vllm.served_name, "prompt": char, "add_special_tokens": False},
        ).json()
        if answer["count"] > 1:
            return int(answer["tokens"][0])
    raise AssertionError("every candidate character is one token in this vocabulary")


def _shape(event: Any) -> Any:
    return event if event == "[DONE]" else captures.normalise(event)


def _stream_one_chunk_per_token(real_vllm: RealServer, body: Any, *, tokens: int) -> list[Any]:
    """The forced stream, asked again until it comes one chunk per token. vLLM merges the
    deltas a request has waiting when its reader falls behind the engine (on a loaded machine),
    so fewer chunks is vLLM's behaviour too; what holds for every stream is asserted on each."""
    for _ in range(5):
        events = real_vllm.stream("/v1/completions", body)
        assert events[-1] == "[DONE]"
        chunks = events[:-1]
        assert 1 <= len(chunks) <= tokens
        assert all(chunk["choices"][0]["text"] == "" for chunk in chunks)
        assert [chunk["choices"][0]["finish_reason"] for chunk in chunks] == [None] * (
            len(chunks) - 1
        ) + ["length"]
        if len(chunks) == tokens:
            return events
    raise AssertionError(f"vLLM merged the chunks of 5 streams of {tokens} tokens in a row")


def test_streamed_completion_sends_chunks_with_empty_text(real_vllm: RealServer) -> None:
    lead = _lead_byte_token(real_vllm)
    body = {
        "model": real_vllm.served_name,
        "prompt": "Arrows point the way",
        "max_tokens": 4,
        "temperature": 0,
        "allowed_token_ids": [lead],
    }
    forced = _stream_one_chunk_per_token(real_vllm, body, tokens=4)
    forced_whole = real_vllm.post("/v1/completions", body)
    with_usage = real_vllm.stream(
        "/v1/completions",
        {
            "model": real_vllm.served_name,
            "prompt": "Café crème, déjà vu →",
            "max_tokens": 6,
            "temperature": 0,
            "stream_options": {"include_usage": True},
        },
    )

    assert forced_whole.json()["usage"]["completion_tokens"] == 4
    assert with_usage[-1] == "[DONE]"
    usage_chunk = with_usage[-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == 6

    _capture(
        real_vllm,
        "completion-stream",
        "Streamed /v1/completions. `forced`: allowed_token_ids limited to one token that is the "
        "first byte(s) of a multi-byte UTF-8 character, so no chunk completes a character: one "
        'chunk per token, each with text "" (vLLM merges the deltas waiting into one chunk '
        "when the reader falls behind). `with_usage`: stream_options.include_usage adds "
        "a last chunk with choices [] and the usage. Generated words are shown as <text>.",
        forced_request={**body, "allowed_token_ids": ["<lead byte token>"]},
        forced=[_shape(event) for event in forced],
        forced_not_streamed=_answer(forced_whole, words=False),
        with_usage=[_shape(event) for event in with_usage],
    )


def test_chat_stream_sends_reasoning_as_delta_reasoning(real_vllm: RealServer) -> None:
    messages = [{"role": "user", "content": "What is two plus two?"}]
    base = {"model": real_vllm.served_name, "messages": messages, "max_tokens": 5, "temperature": 0}
    thinking = real_vllm.stream(
        "/v1/chat/completions", {**base, "chat_template_kwargs": {"enable_thinking": True}}
    )
    plain = real_vllm.stream(
        "/v1/chat/completions", {**base, "stream_options": {"include_usage": True}}
    )
    whole_thinking = real_vllm.post(
        "/v1/chat/completions", {**base, "chat_template_kwargs": {"enable_thinking": True}}
    )
    whole_plain = real_vllm.post("/v1/chat/completions", base)

    deltas = [event["choices"][0]["delta"] for event in thinking[:-1] if event["choices"]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert any("reasoning" in delta for delta in deltas[1:])
    assert not any("reasoning_content" in delta for delta in deltas)
    assert not any("content" in delta for delta in deltas[1:])  # no </think>: all reasoning
    plain_deltas = [event["choices"][0]["delta"] for event in plain[:-1] if event["choices"]]
    assert not any("reasoning" in delta for delta in plain_deltas)
    message = whole_thinking.json()["choices"][0]["message"]
    assert message["reasoning"] and message["content"] is None
    assert "reasoning_content" not in message
    plain_message = whole_plain.json()["choices"][0]["message"]
    assert plain_message["reasoning"] is None
    # No tools were offered: the message carries no tool_calls key at all (not even []).
    assert "tool_calls" not in plain_message

    _capture(
        real_vllm,
        "chat-stream",
        "Streamed and whole /v1/chat/completions with --reasoning-parser deepseek_v3; "
        '`thinking` asks for it with chat_template_kwargs {"enable_thinking": true} (the '
        "template then opens the answer with <think>, and the random model never closes it). "
        "Reasoning arrives as delta.reasoning / message.reasoning; reasoning_content never "
        "appears. Generated words are shown as <text>.",
        thinking=[_shape(event) for event in thinking],
        plain=[_shape(event) for event in plain],
        thinking_not_streamed=_answer(whole_thinking),
        plain_not_streamed=_answer(whole_plain),
    )


# --- errors -------------------------------------------------------------------------------


def test_requests_beyond_max_model_len_are_refused_with_400(real_vllm: RealServer) -> None:
    name = real_vllm.served_name
    too_many = real_vllm.post(
        "/v1/completions", {"model": name, "prompt": "Hi", "max_tokens": 5000}
    )
    absurd = real_vllm.post(
        "/v1/completions", {"model": name, "prompt": "Hi", "max_tokens": 10_000_000}
    )
    long_prompt = "gpu " * (MAX_MODEL_LEN + 200)
    too_long = real_vllm.post(
        "/v1/completions", {"model": name, "prompt": long_prompt, "max_tokens": 4}
    )
    chat_too_many = real_vllm.post(
        "/v1/chat/completions",
        {"model": name, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5000},
    )
    unknown_model = real_vllm.post(
        "/v1/completions", {"model": "no/such-model", "prompt": "Hi", "max_tokens": 1}
    )

    for answer in (too_many, absurd, too_long, chat_too_many):
        assert answer.status == 400, answer.text
        error = answer.json()["error"]
        assert error["type"] == "BadRequestError"
        assert error["code"] == 400
    assert "max_model_len=1024" in too_many.json()["error"]["message"]
    assert unknown_model.status == 404

    _capture(
        real_vllm,
        "errors",
        "Requests the server refuses before generating: max_tokens above max_model_len "
        f'({MAX_MODEL_LEN}), a prompt longer than it ("gpu " x {MAX_MODEL_LEN + 200}), the '
        "same through chat, and an unknown model name.",
        max_tokens_5000=_answer(too_many, words=False),
        max_tokens_10_000_000=_answer(absurd, words=False),
        prompt_too_long=_answer(too_long, words=False),
        chat_max_tokens_5000=_answer(chat_too_many, words=False),
        unknown_model=_answer(unknown_model, words=False),
    )


# --- metrics ------------------------------------------------------------------------------

_TYPE = re.compile(r"^# TYPE (\S+) (\S+)$")
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? \S+")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="(?:[^"\\]|\\.)*"')


def metric_families(text: str, prefix: str = "vllm:") -> dict[str, dict[str, Any]]:
    """Prometheus text -> {family: {type, samples: {sample name: label names in order}}}."""
    families: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        typed = _TYPE.match(line)
        if typed and typed.group(1).startswith(prefix):
            families[typed.group(1)] = {"type": typed.group(2), "samples": {}}
            continue
        sample = _SAMPLE.match(line)
        if not sample or not sample.group(1).startswith(prefix):
            continue
        name = sample.group(1)
        family = next(
            (f for f in sorted(families, key=len, reverse=True) if name.startswith(f)), None
        )
        if family is None:
            continue
        labels = _LABEL.findall(sample.group(2) or "")
        families[family]["samples"].setdefault(name, labels)
    return families


def _label_values(text: str, label: str) -> list[str]:
    return sorted(set(re.findall(rf'\b{label}="([^"]*)"', text)))


def test_metrics_families_and_their_labels(real_vllm: RealServer) -> None:
    # Some traffic first, so the histograms and counters have samples.
    real_vllm.post(
        "/v1/completions", {"model": real_vllm.served_name, "prompt": "Hello", "max_tokens": 3}
    )
    metrics = real_vllm.get("/metrics", key=None)
    assert metrics.status == 200
    families = metric_families(metrics.text)

    for expected in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
    ):
        assert any(f in (expected, f"{expected}_total") for f in families), expected
    running = families["vllm:num_requests_running"]
    assert running["type"] == "gauge"
    # engine first, then model_name.
    assert running["samples"]["vllm:num_requests_running"][:2] == ["engine", "model_name"]
    assert real_vllm.served_name in _label_values(metrics.text, "model_name")

    _capture(
        real_vllm,
        "metrics",
        "The vllm: metric families on /metrics (as `# TYPE` names them), each with its type and, "
        "per sample name, the label names in the order printed; plus the values of model_name "
        "and engine, and the content type.",
        content_type=metrics.headers.get("content-type"),
        family_count=len(families),
        families=families,
        label_values={
            "model_name": _label_values(metrics.text, "model_name"),
            "engine": _label_values(metrics.text, "engine"),
        },
        other_prefixes=sorted(
            {
                line.split()[2].split("_")[0]
                for line in metrics.text.splitlines()
                if line.startswith("# TYPE") and not line.split()[2].startswith("vllm:")
            }
        ),
    )


# --- the journal --------------------------------------------------------------------------

_ACCESS = re.compile(r'^INFO: +127\.0\.0\.1:\d+ - "(GET|POST) (\S+) HTTP/1\.1" (\d{3}) ')
_PROCESS = re.compile(r"^\((\w[\w-]*) pid=\d+\)")
_ROUTE = re.compile(r"Route: (\S+), Methods: (.*)$")


def _session_processes(leader: int) -> list[dict[str, str]]:
    """The processes of the server's session: their names (comm) and titles (cmdline)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[3]) != leader:  # field 6 of stat: the session id
            continue
        title = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
        found.append({"comm": comm, "cmdline": title})
    return found


_OWN_REQUESTS = ("/health", "/v1/models", "/metrics")


def test_startup_journal_lines(real_vllm: RealServer) -> None:
    real_vllm.get("/health", key=None)
    real_vllm.get("/v1/models")
    real_vllm.get("/v1/models", key=None)
    real_vllm.get("/metrics", key=None)
    lines = real_vllm.log_text().splitlines()
    replacements = {
        str(real_vllm.model_dir): "<model dir>",
        real_vllm.api_key: "<api key>",
        str(real_vllm.command[0]): "<env>/bin/vllm",
        str(Path(real_vllm.command[0]).parent.parent): "<env>",
    }

    non_default = [line for line in lines if "non-default args:" in line]
    assert len(non_default) == 1
    assert re.match(
        r"^\(APIServer pid=\d+\) INFO \d{2}-\d{2} \d{2}:\d{2}:\d{2} \[api_utils\.py:\d+\] "
        r"non-default args: \{",
        non_default[0],
    ), non_default[0]
    assert "'api_key': '***'" in non_default[0]
    assert real_vllm.api_key not in real_vllm.log_text()
    access = [line for line in lines if _ACCESS.match(line)]
    assert any('"GET /health HTTP/1.1" 200 OK' in line for line in access)
    assert any('"GET /v1/models HTTP/1.1" 200 OK' in line for line in access)
    starting = [line for line in lines if "Starting vLLM server on" in line]
    assert len(starting) == 1
    prefixes = sorted({m.group(1) for line in lines if (m := _PROCESS.match(line))})
    assert "APIServer" in prefixes and "EngineCore" in prefixes
    # vLLM prints each route's methods from a set: in no fixed order, so sorted here.
    routes = [
        {"path": m.group(1), "methods": ", ".join(sorted(m.group(2).split(", ")))}
        for line in lines
        if (m := _ROUTE.search(line))
    ]
    assert {"path": "/invocations", "methods": "POST"} in routes
    processes = _session_processes(real_vllm.process.pid)
    names = sorted({process["comm"] for process in processes})

    def clean(line: str) -> str:
        return captures.normalise_log_line(line, replacements)

    head = [clean(line) for line in lines[:12]]
    _capture(
        real_vllm,
        "journal",
        "The server's own output (what a unit's journal shows) with pids, times, ports and "
        "paths replaced: its first lines, the non-default args line, the start line, the "
        "uvicorn access lines our own requests caused, the log-line prefixes (process names), "
        "the routes it lists, and the names and titles of the processes in its session.",
        first_lines=head,
        non_default_args=clean(non_default[0]),
        starting=clean(starting[0]),
        uvicorn_lines=[
            clean(line)
            for line in lines
            if line.startswith("INFO:     ") and not _ACCESS.match(line)
        ],
        # What a probe's three requests leave in the journal (the test made them itself).
        access_line_examples=sorted(
            {clean(line) for line in access if _ACCESS.match(line).group(2) in _OWN_REQUESTS}
        ),
        access_line_format=(
            'INFO:     <client ip>:<port> - "<METHOD> <path> HTTP/1.1" <status> <reason>'
        ),
        log_prefixes=prefixes,
        routes=routes,
        processes={
            "comm": names,
            "cmdline": sorted({clean(process["cmdline"]) for process in processes}),
        },
    )
