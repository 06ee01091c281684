"""The serving benchmark client, run for real against a small streaming server in this test.

The server streams server-sent events at a known pace (first token after 50 ms, then one every
10 ms); what the client measures must come out within tolerance of what the server did. It
counts tokens as a BPE tokenizer with a BOS would (`bpe_count`), in its usage and its /tokenize.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from deployments.host_scripts import (
    SERVING_BENCH,
    BenchOutputError,
    parse_bench_output,
    serving_bench_argv,
)

TTFT_S = 0.050
TOKEN_S = 0.010


def bpe_count(prompt: str) -> int:
    """A BOS, one token for a word of up to four letters, two for a longer one: so 128 words of
    the client's list are about 146 tokens, as with the real tokenizer the issue met."""
    return 1 + sum(1 if len(word) <= 4 else 2 for word in prompt.split())


@dataclass
class Behaviour:
    """What the test server does; tests change it."""

    ttft_s: float = TTFT_S
    token_s: float = TOKEN_S
    tokens_per_chunk: int = 1
    status: int = 200
    api_key: str = ""
    stall_s: float = 0.0  # sleep this long before answering at all
    usage: bool = True
    drop_idle: bool = False  # close each connection after its response, without saying so
    count: Callable[[str], int] | None = bpe_count  # /tokenize and usage; None: no /tokenize
    # Before the first token with text: this many chunks of empty text (a token ending inside
    # a UTF-8 character), and (chat) this many reasoning tokens in `reasoning_field`, each
    # `token_s` apart.
    empty_chunks: int = 0
    reasoning_tokens: int = 0
    reasoning_field: str = "reasoning"
    seen: list[dict[str, Any]] = field(default_factory=list)
    tokenized: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    auth: list[str] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as asyncio servers (uvicorn) set it: else each small JSON answer, written
    # head then body, waits for a delayed ACK (40 ms a /tokenize call).
    disable_nagle_algorithm = True
    behaviour: Behaviour

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _error(self, status: int, message: str) -> None:
        body = json.dumps({"error": {"message": message, "code": status}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        b = self.behaviour
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path.endswith("/tokenize"):  # vLLM's route, beside /v1
            if b.count is None:
                return self._json(404, {"detail": "Not Found"})
            b.tokenized.append(payload["prompt"])
            n = b.count(payload["prompt"])
            return self._json(200, {"count": n, "max_model_len": 4096, "tokens": [7] * n})
        b.seen.append(payload)
        b.paths.append(self.path)
        b.auth.append(self.headers.get("Authorization", ""))
        if b.stall_s:
            time.sleep(b.stall_s)
        if b.api_key and self.headers.get("Authorization") != f"Bearer {b.api_key}":
            return self._error(401, "Unauthorized")
        if b.status != 200:
            return self._error(b.status, "the engine is sad")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._stream(payload)

    def _stream(self, payload: dict[str, Any]) -> None:
        b = self.behaviour
        chat = "messages" in payload
        total = payload["max_tokens"]
        prompt = payload["messages"][0]["content"] if chat else payload["prompt"]
        prompt_tokens = (b.count or bpe_count)(prompt)
        time.sleep(b.ttft_s)
        if chat:
            self._event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        early = b.empty_chunks + (b.reasoning_tokens if chat else 0)
        for k in range(early):  # tokens before the first text: each its own chunk
            if k:
                time.sleep(b.token_s)
            thinking = k >= b.empty_chunks
            delta = {b.reasoning_field: " hmm"} if thinking else {"content": ""}
            choice = {"index": 0, "delta": delta} if chat else {"index": 0, "text": ""}
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": k + 1}
            self._event({"choices": [choice], "usage": usage if b.usage else None})
        if early:
            time.sleep(b.token_s)
        sent = early
        while sent < total:
            if sent > early:
                time.sleep(b.token_s * b.tokens_per_chunk)
            n = min(b.tokens_per_chunk, total - sent)
            sent += n
            text = " tok" * n
            choice = (
                {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
            )
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": sent}
            self._event({"choices": [choice], "usage": usage if b.usage else None})
        if b.usage:
            self._event(
                {
                    "choices": [],
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": sent},
                }
            )
        self._send(b"data: [DONE]\n\n")
        self._send(b"")
        self.close_connection = b.drop_idle

    def _event(self, data: dict[str, Any]) -> None:
        self._send(b"data: " + json.dumps(data).encode() + b"\n\n")


@pytest.fixture
def server() -> Iterator[tuple[str, Behaviour]]:
    behaviour = Behaviour()
    handler = type("Handler", (_Handler,), {"behaviour": behaviour})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", behaviour
    finally:
        httpd.shutdown()
        httpd.server_close()


def bench(
    url: str, *args: str, python: str = sys.executable, env: dict[str, str] | None = None
) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    argv = [python, "-I", "-", "--url", url, "--model", "m", *args]
    proc = subprocess.run(
        argv, input=SERVING_BENCH, capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc


def test_the_script_is_the_file_next_to_it() -> None:
    path = Path(__file__).parents[2] / "deployments" / "host_scripts" / "serving_bench.py"
    assert path.read_text() == SERVING_BENCH


def test_one_stream_measures_what_the_server_did(server: tuple[str, Behaviour]) -> None:
    url, _ = server
    _, proc = bench(url, "--num-requests", "3", "--output-tokens", "20", "--ignore-eos")
    assert proc.stdout.count("\n") == 1  # exactly one JSON line
    result = parse_bench_output(proc.stdout)
    assert (result.requests, result.completed, result.errors) == (3, 3, 0)
    assert result.output_tokens == 60
    assert 50 <= result.ttft_ms.p50 <= 70  # type: ignore[operator]
    assert 9 <= result.itl_ms.p50 <= 13  # type: ignore[operator]
    assert 9.5 <= result.tpot_ms.mean <= 12.5  # type: ignore[operator]
    expected_e2el = (TTFT_S + 19 * TOKEN_S) * 1000  # 240 ms
    assert expected_e2el <= result.e2el_ms.mean <= expected_e2el * 1.15  # type: ignore[operator]
    # One stream, back to back: 20 tokens every ~240 ms.
    assert 20 / 0.240 * 0.85 <= result.output_tok_s <= 20 / 0.240 * 1.01
    # Counted in the model's tokens (the server's /tokenize), a BOS included: 128 each.
    assert result.input_tokens == 3 * 128
    assert result.input_tokens_asked == 128 and result.input_counted_by == "tokenize"
    assert (result.input_tokens_sent.min, result.input_tokens_sent.max) == (128, 128)


@pytest.mark.realtime
def test_concurrent_streams_add_up(server: tuple[str, Behaviour]) -> None:
    url, behaviour = server
    out, _ = bench(
        url, "--concurrency", "8", "--num-requests", "16", "--output-tokens", "30",
        "--input-tokens", "12", "--ignore-eos",
    )  # fmt: skip
    assert out["completed"] == 16 and out["errors"] == 0
    per_request = TTFT_S + 29 * TOKEN_S  # 340 ms; two waves of eight
    assert 8 * 30 / per_request * 0.8 <= out["output_tok_s"] <= 8 * 30 / per_request * 1.01
    assert 50 <= out["ttft_ms"]["p50"] <= 75
    assert 9 <= out["itl_ms"]["p50"] <= 13
    assert len(behaviour.seen) == 16
    assert [bpe_count(p["prompt"]) for p in behaviour.seen] == [12] * 16
    assert len({p["prompt"] for p in behaviour.seen}) == 16  # no two prompts alike
    first = behaviour.seen[0]
    assert first["stream"] is True and first["ignore_eos"] is True and first["max_tokens"] == 30
    assert first["stream_options"]["include_usage"] is True


def test_prompts_are_deterministic_per_seed(server: tuple[str, Behaviour]) -> None:
    url, behaviour = server
    bench(url, "--num-requests", "2", "--output-tokens", "2", "--seed", "7")
    bench(url, "--num-requests", "2", "--output-tokens", "2", "--seed", "7")
    bench(url, "--num-requests", "2", "--output-tokens", "2", "--seed", "8")
    prompts = (
        sorted(p["prompt"] for p in behaviour.seen[:2]),
        sorted(p["prompt"] for p in behaviour.seen[2:4]),
    )
    assert prompts[0] == prompts[1]
    assert not set(prompts[0]) & {p["prompt"] for p in behaviour.seen[4:]}


def test_chat_endpoint_and_path_prefix(server: tuple[str, Behaviour]) -> None:
    url, behaviour = server
    out, _ = bench(url + "/sim/gpu-01/8000/", "--endpoint", "chat", "--output-tokens", "10")
    assert out["completed"] == 1 and out["output_tokens"] == 10
    assert 50 <= out["ttft_ms"]["mean"] <= 75  # the role-only chunk is not the first token
    assert behaviour.paths == ["/sim/gpu-01/8000/v1/chat/completions"]
    assert behaviour.seen[0]["messages"][0]["role"] == "user"


def test_itl_is_per_chunk_as_vllm_bench_serve_and_also_per_token(
    server: tuple[str, Behaviour],
) -> None:
    url, behaviour = server
    behaviour.tokens_per_chunk = 4  # --stream-interval 4: a chunk every 40 ms, 4 tokens in each
    out, _ = bench(url, "--output-tokens", "40")
    assert out["output_tokens"] == 40
    assert 38 <= out["itl_ms"]["p50"] <= 46  # one gap per chunk, as vllm bench serve has it
    assert 9 <= out["itl_per_token_ms"]["p50"] <= 13  # 40 ms split over the 4 tokens
    assert 9 <= out["tpot_ms"]["mean"] <= 13


def test_ttft_is_the_first_chunk_even_with_empty_text(server: tuple[str, Behaviour]) -> None:
    url, behaviour = server
    # The first token ends inside a UTF-8 character: its chunk's text is "", and the character
    # arrives with the next token, 100 ms later.
    behaviour.empty_chunks, behaviour.token_s = 1, 0.100
    out, _ = bench(url, "--output-tokens", "3")
    assert 50 <= out["ttft_ms"]["mean"] <= 80  # not 150: the empty chunk is the first token
    assert out["output_tokens"] == 3 and out["completed"] == 1
    assert 95 <= out["itl_ms"]["p50"] <= 130  # and each chunk is one ITL sample
    # The same in chat: a delta with empty content is a token; the role alone is not.
    out, _ = bench(url, "--endpoint", "chat", "--output-tokens", "3")
    assert 50 <= out["ttft_ms"]["mean"] <= 80


@pytest.mark.parametrize("field_name", ["reasoning", "reasoning_content"])
def test_a_reasoning_models_first_token_is_its_first_thought(
    server: tuple[str, Behaviour], field_name: str
) -> None:
    url, behaviour = server
    # vLLM 0.32 streams thinking as delta.reasoning (older: reasoning_content), 10 tokens
    # of it before the answer.
    behaviour.reasoning_tokens, behaviour.reasoning_field = 10, field_name
    out, _ = bench(url, "--endpoint", "chat", "--output-tokens", "20")
    assert 50 <= out["ttft_ms"]["mean"] <= 75  # not ~150: the answer's first token
    assert out["output_tokens"] == 20
    assert 9 <= out["itl_ms"]["p50"] <= 13


def test_input_tokens_are_counted_with_the_servers_tokenize(
    server: tuple[str, Behaviour],
) -> None:
    url, behaviour = server
    out, _ = bench(url, "--num-requests", "4", "--input-tokens", "128", "--output-tokens", "2")
    # Counted in words, 128 words were ~146 tokens on this tokenizer.
    assert [bpe_count(p["prompt"]) for p in behaviour.seen] == [128] * 4
    assert out["input_tokens_asked"] == 128 and out["input_counted_by"] == "tokenize"
    assert out["input_tokens_sent"] == {"mean": 128.0, "min": 128, "max": 128}
    assert out["input_tokens"] == 4 * 128 and out["notes"] == []
    # Bounded and before the clock: the word list once, plus two, however many requests.
    calls = len(behaviour.tokenized)
    bench(url, "--num-requests", "16", "--concurrency", "4", "--output-tokens", "2")
    assert len(behaviour.tokenized) - calls == calls <= 120


def test_without_tokenize_the_prompt_is_words_and_a_note_says_so(
    server: tuple[str, Behaviour],
) -> None:
    url, behaviour = server
    behaviour.count = None  # SGLang, an older vLLM: no /tokenize
    out, _ = bench(url, "--num-requests", "2", "--input-tokens", "20", "--output-tokens", "2")
    assert out["completed"] == 2 and out["errors"] == 0
    assert [len(p["prompt"].split()) for p in behaviour.seen] == [20, 20]
    assert out["input_counted_by"] == "words" and out["input_tokens_asked"] == 20
    # The server's usage says what was sent: more than 20 tokens on this tokenizer.
    counted = sorted(bpe_count(p["prompt"]) for p in behaviour.seen)
    assert [out["input_tokens_sent"][k] for k in ("min", "max")] == counted
    assert out["input_tokens_sent"]["mean"] == sum(counted) / 2 > 20
    assert "no /tokenize (HTTP 404)" in out["notes"][0]
    parse_bench_output(json.dumps(out))


def test_without_usage_tokens_are_counted_from_chunks(server: tuple[str, Behaviour]) -> None:
    url, behaviour = server
    behaviour.usage = False
    out, _ = bench(url, "--output-tokens", "15", "--input-tokens", "9")
    assert out["output_tokens"] == 15 and out["input_tokens"] == 9


def test_a_kept_alive_connection_the_server_dropped_is_reopened(
    server: tuple[str, Behaviour],
) -> None:
    url, behaviour = server
    behaviour.drop_idle = True
    out, _ = bench(url, "--num-requests", "3", "--output-tokens", "3")
    assert out["completed"] == 3 and out["errors"] == 0


def test_http_errors_are_counted_not_raised(server: tuple[str, Behaviour]) -> None:
    url, behaviour = server
    behaviour.status = 503
    out, _ = bench(url, "--concurrency", "2", "--num-requests", "4")
    result = parse_bench_output(json.dumps(out))
    assert (result.completed, result.errors) == (0, 4)
    assert result.error_samples == ("HTTP 503: the engine is sad",)
    assert result.ttft_ms.mean is None and result.output_tok_s == 0


def test_the_api_key_comes_from_the_environment(server: tuple[str, Behaviour]) -> None:
    url, behaviour = server
    behaviour.api_key = "s3cret-key"
    out, _ = bench(url, "--api-key-env", "BENCH_KEY")
    assert out["errors"] == 1 and out["error_samples"] == ["HTTP 401: Unauthorized"]
    env = {**os.environ, "BENCH_KEY": "s3cret-key"}
    out, _ = bench(url, "--api-key-env", "BENCH_KEY", env=env)
    assert out["completed"] == 1
    assert behaviour.auth[-1] == "Bearer s3cret-key"
    argv = serving_bench_argv(
        "/opt/vllm/.venv/bin/python3", port=8000, model="m", concurrency=1, num_requests=1,
        input_tokens=8, output_tokens=8, api_key_env="VLLM_API_KEY",
    )  # fmt: skip
    assert "s3cret-key" not in " ".join(argv) and argv[-2:] == ["--api-key-env", "VLLM_API_KEY"]


def test_connection_refused_and_timeouts_are_errors(server: tuple[str, Behaviour]) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        out, _ = bench(f"http://127.0.0.1:{port}", "--num-requests", "3", "--concurrency", "3")
    assert out["errors"] == 3 and "Connection refused" in out["error_samples"][0]
    url, behaviour = server
    behaviour.stall_s = 1.0
    started = time.monotonic()
    out, _ = bench(url, "--timeout", "0.3")
    assert out["errors"] == 1 and out["error_samples"] == ["timeout"]
    assert time.monotonic() - started < 5


def test_bad_arguments_exit_2_without_json() -> None:
    proc = subprocess.run(
        [sys.executable, "-I", "-", "--url", "ftp://x", "--model", "m"],
        input=SERVING_BENCH,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and proc.stdout == "" and "--url" in proc.stderr


def _python_3_9() -> str | None:
    for candidate in ("/root/.pyenv/versions/3.9.18/bin/python3.9", shutil.which("python3.9")):
        if not candidate or not Path(candidate).exists():
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if probe.stdout.strip() == "(3, 9)":
            return candidate
    return None


def test_runs_on_python_3_9(server: tuple[str, Behaviour]) -> None:
    python = _python_3_9()
    if python is None:
        pytest.skip("no Python 3.9 here")
    url, _ = server
    out, _ = bench(url, "--concurrency", "2", "--num-requests", "2", python=python)
    assert out["completed"] == 2


# --- the parser ---------------------------------------------------------------------------


def _good() -> dict[str, Any]:
    stats = {"mean": 1.0, "p50": 1.0, "p99": 2.0}
    return {
        "ok": True, "version": 2, "concurrency": 2, "requests": 3, "completed": 2, "errors": 1,
        "duration_s": 1.5, "output_tokens": 40, "input_tokens": 20, "output_tok_s": 26.7,
        "total_tok_s": 40.0, "requests_s": 1.33, "ttft_ms": stats, "itl_ms": stats,
        "itl_per_token_ms": stats, "tpot_ms": stats, "e2el_ms": stats,
        "input_tokens_asked": 10, "input_tokens_sent": {"mean": 10.0, "min": 10, "max": 10},
        "input_counted_by": "tokenize", "error_samples": ["HTTP 500: boom"], "notes": [],
    }  # fmt: skip


def test_the_parser_reads_a_good_result() -> None:
    result = parse_bench_output("\n" + json.dumps(_good()) + "\n")
    assert result.completed == 2 and result.ttft_ms.p99 == 2.0
    assert result.error_samples == ("HTTP 500: boom",)
    assert result.itl_per_token_ms.p99 == 2.0 and result.input_tokens_sent.max == 10


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "printed nothing"),
        ("Traceback (most recent call last):", "not JSON"),
        (json.dumps(_good())[:-30], "truncated"),
        (json.dumps(_good()) + "\n" + json.dumps(_good()), "one JSON line"),
        ("[1, 2]", "not a JSON object"),
        ('{"ok": false, "version": 2, "error": "boom"}', "failed: boom"),
        (json.dumps({**_good(), "version": 1}), "unknown output version 1"),
        (json.dumps({k: v for k, v in _good().items() if k != "itl_ms"}), "lacks itl_ms"),
        (json.dumps({**_good(), "extra": 1}), "unknown fields extra"),
        (json.dumps({**_good(), "completed": 1}), "do not add up"),
        (json.dumps({**_good(), "requests": 3.0}), "non-negative integer"),
        (json.dumps({**_good(), "output_tok_s": "fast"}), "must be a number"),
        (json.dumps({**_good(), "output_tok_s": -1}), "non-negative"),
        (json.dumps({**_good(), "duration_s": float("nan")}), "NaN"),
        (json.dumps({**_good(), "ttft_ms": {"mean": 1.0, "p50": None, "p99": 2.0}}), "missing"),
        (json.dumps({**_good(), "e2el_ms": {"mean": None, "p50": None, "p99": None}}), "match"),
        (json.dumps({**_good(), "error_samples": []}), "no error sample"),
        (json.dumps({**_good(), "error_samples": ["a"] * 6}), "at most 5"),
        (json.dumps({k: v for k, v in _good().items() if k != "itl_per_token_ms"}), "lacks"),
        (json.dumps({**_good(), "input_counted_by": "guess"}), "input_counted_by"),
        (json.dumps({**_good(), "input_tokens_asked": 0}), "positive integer"),
        (json.dumps({**_good(), "input_tokens_sent": {"mean": None, "min": 1, "max": 1}}), "match"),
        (json.dumps({**_good(), "notes": "x"}), "notes must be a list"),
        (json.dumps({**_good(), "ok": "yes"}), "ok must be"),
    ],
)
def test_the_parser_refuses_anything_else(text: str, why: str) -> None:
    with pytest.raises(BenchOutputError, match=why):
        parse_bench_output(text)
