"""Serving benchmark client: streams completions from an OpenAI-compatible server, times tokens.

Runs on a GPU host with the engine's own Python, fed on stdin (`python3 -I - --url ...`), so it
uses the standard library only and runs on Python 3.9 and later. It prints exactly one JSON
object on stdout and exits 0 whenever it printed it; a failing server (connection refused, HTTP
4xx/5xx, a timeout) is counted in `errors`, with up to five short samples.

Metrics follow `vllm bench serve`:

- TTFT: from sending the request to the first chunk that carries text.
- ITL: the gaps between successive text chunks. Where this differs: when the server reports
  usage in every chunk (`continuous_usage_stats`, which vLLM honours) and a chunk carries k
  tokens, its gap counts as k gaps of gap/k, so ITL stays per token rather than per chunk.
- TPOT: per request, (E2EL - TTFT) / (output tokens - 1), for requests with more than one token.
- E2EL: from sending the request to its last text chunk. Requests/s counts completed ones.
- Output throughput: output tokens over the duration (first send to last end); total adds input.
- Token counts come from the server's `usage`, else the text chunks and the prompt's words.
- Also different: a chat chunk with only the assistant role is not a token. Percentiles are
  numpy's default (linear).

Prompts are synthetic and deterministic: request i of seed s draws N words from a fixed list of
common English words (random.Random(s * 1000003 + i)), so `--input-tokens N` sends N words. A
common lowercase word after a space is one token in the usual BPE vocabularies, so a prompt is
about N tokens (a tokenizer that prepends a BOS adds one). Each request gets different words,
so a prefix cache does not flatter the numbers. `--prompt TEXT` (repeatable) is a fixed prompt
set instead: request i sends the (i mod n)-th (vllm bench serve's custom dataset).

Bad arguments exit 2 with argparse's usage and no JSON; anything else unexpected prints
{"ok": false, "error": ...}. The API key, if any, is read from the environment variable
`--api-key-env` names: on the command line it would show in `ps` on the host.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import sys
import threading
import time
from urllib.parse import urlsplit

VERSION = 1
MAX_ERROR_SAMPLES = 5
WORDS = (  # noqa: SIM905 - as a list literal, a line each
    "the of and to in is was for on that with as by at from his her they this have had not are "
    "but one all were when we there can an which their said if do will each about how up out "
    "them then she many some so these would other into has more two like him see time could no "
    "make than first been its who now people my made over did down only way find use may water "
    "long little very after words called just where most know get through back much before go "
).split()


class BenchError(Exception):
    """A request that did not complete: the short text that goes into error_samples."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="serving_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--model", required=True, help="the served model name")
    parser.add_argument("--api-key-env", default="", help="environment variable with the key")
    parser.add_argument("--endpoint", choices=("completions", "chat"), default="completions")
    parser.add_argument("--concurrency", type=int, default=1)
    count = parser.add_mutually_exclusive_group()
    count.add_argument("--num-requests", type=int, default=None)
    count.add_argument("--duration", type=float, default=None, help="seconds to keep sending")
    parser.add_argument("--input-tokens", type=int, default=128)
    parser.add_argument("--prompt", action="append", default=[], help="a prompt (repeatable)")
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--ignore-eos", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=120.0, help="per request, seconds")
    args = parser.parse_args(argv)
    for name in ("concurrency", "input_tokens", "output_tokens", "num_requests", "duration"):
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    url = urlsplit(args.url)
    if url.scheme not in ("http", "https") or not url.hostname:
        parser.error(f"--url {args.url!r}: need http://HOST[:PORT][/PREFIX]")
    return args


def prompt_for(seed: int, index: int, words: int, prompts: list[str] | None = None) -> str:
    if prompts:
        return prompts[index % len(prompts)]
    rng = random.Random(seed * 1000003 + index)
    return " ".join(rng.choice(WORDS) for _ in range(words))


class Target:
    """Where requests go and what they carry (everything but the prompt)."""

    def __init__(self, args: argparse.Namespace) -> None:
        url = urlsplit(args.url)
        self.https = url.scheme == "https"
        self.host = url.hostname or ""
        self.port = url.port or (443 if self.https else 80)
        suffix = "/v1/chat/completions" if args.endpoint == "chat" else "/v1/completions"
        self.path = url.path.rstrip("/") + suffix
        self.chat = args.endpoint == "chat"
        self.args = args
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
        if key:
            self.headers["Authorization"] = "Bearer " + key

    def connect(self) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return kind(self.host, self.port, timeout=self.args.timeout)

    def body(self, prompt: str) -> bytes:
        args = self.args
        payload: dict[str, object] = {
            "model": args.model,
            "max_tokens": args.output_tokens,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        if args.ignore_eos:
            payload["ignore_eos"] = True
        if self.chat:
            payload["messages"] = [{"role": "user", "content": prompt}]
        else:
            payload["prompt"] = prompt
        return json.dumps(payload).encode()


class Outcome:
    """One request's measurements (times in seconds from its send)."""

    def __init__(self, words: int) -> None:
        self.ok = False
        self.error = ""
        self.ttft = 0.0
        self.e2el = 0.0
        self.itl: list[float] = []
        self.chunks = 0
        self.output_tokens: int | None = None  # from usage
        self.input_tokens: int | None = None
        self.words = words
        self.finished_at = 0.0  # perf_counter

    @property
    def tokens(self) -> int:
        return self.output_tokens if self.output_tokens is not None else self.chunks


def _chunk_text(data: dict[str, object], chat: bool) -> str:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    part = choices[0].get("delta") if chat else choices[0]  # chat streams deltas
    if not isinstance(part, dict):
        return ""
    text = (part.get("content") or part.get("reasoning_content")) if chat else part.get("text")
    return text if isinstance(text, str) else ""


def _usage(data: dict[str, object]) -> tuple[int | None, int | None]:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None, None
    done, prompt = usage.get("completion_tokens"), usage.get("prompt_tokens")
    return (
        done if isinstance(done, int) else None,
        prompt if isinstance(prompt, int) else None,
    )


def _read_stream(
    response: http.client.HTTPResponse, outcome: Outcome, chat: bool, sent: float, deadline: float
) -> None:
    last = sent
    seen_tokens = 0  # the usage count at the last text chunk, for per-token ITL
    while True:
        raw = response.readline()
        now = time.perf_counter()
        if now > deadline:
            raise BenchError("timeout")
        if not raw:
            raise BenchError("stream ended before [DONE]")
        line = raw.decode("utf-8", "replace").strip()
        if not line or line.startswith(":"):
            continue
        if not line.startswith("data:"):
            raise BenchError("not an event stream: " + line[:60])
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        data = json.loads(payload)
        if not isinstance(data, dict):
            raise BenchError("chunk is not a JSON object")
        if "error" in data:
            raise BenchError("server error in stream: " + str(data["error"])[:80])
        done, prompt = _usage(data)
        if prompt is not None:
            outcome.input_tokens = prompt
        if _chunk_text(data, chat):
            if outcome.chunks == 0:
                outcome.ttft = now - sent
            else:
                count = done - seen_tokens if done is not None and done > seen_tokens else 1
                outcome.itl.extend([(now - last) / count] * count)
            outcome.chunks += 1
            last = now
            seen_tokens = done if done is not None else seen_tokens + 1
        if done is not None:
            outcome.output_tokens = done
    if outcome.chunks == 0:
        raise BenchError("no tokens in the stream")
    outcome.e2el = last - sent
    response.read()  # the chunked body's end, so the connection can carry the next request


def _http_error(response: http.client.HTTPResponse) -> BenchError:
    body = response.read(2000).decode("utf-8", "replace")
    message = body.strip().replace("\n", " ")
    try:
        parsed = json.loads(body)
        if isinstance(parsed, dict):
            err = parsed.get("error", parsed.get("detail", parsed))
            if isinstance(err, dict):
                err = err.get("message", err)
            message = str(err)
    except ValueError:
        pass
    return BenchError(f"HTTP {response.status}: {message[:80]}")


class Worker:
    """One connection, sending requests back to back until the shared schedule says stop."""

    def __init__(self, target: Target, schedule: Schedule) -> None:
        self.target = target
        self.schedule = schedule
        self.conn: http.client.HTTPConnection | None = None

    def run(self) -> None:
        while True:
            index = self.schedule.next_index()
            if index is None:
                break
            self.schedule.record(self.request(index))
        if self.conn is not None:
            self.conn.close()

    def request(self, index: int) -> Outcome:
        args = self.target.args
        prompt = prompt_for(args.seed, index, args.input_tokens, args.prompt)
        outcome = Outcome(len(prompt.split()))
        body = self.target.body(prompt)
        sent = time.perf_counter()
        try:
            response = self._send(body)
            if response.status != 200:
                raise _http_error(response)
            _read_stream(response, outcome, self.target.chat, sent, sent + args.timeout)
            outcome.ok = True
        except (BenchError, OSError, http.client.HTTPException, ValueError) as exc:
            outcome.error = _describe(exc)
            if self.conn is not None:
                self.conn.close()
            self.conn = None
        outcome.finished_at = time.perf_counter()
        return outcome

    def _send(self, body: bytes) -> http.client.HTTPResponse:
        """POST on the kept-alive connection; again on a new one if the server had closed it
        while idle, as HTTP clients do (never once a response arrived)."""
        reused = self.conn is not None
        try:
            return self._post(body)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            if not reused:
                raise
            assert self.conn is not None
            self.conn.close()
            self.conn = None
            return self._post(body)

    def _post(self, body: bytes) -> http.client.HTTPResponse:
        if self.conn is None:
            self.conn = self.target.connect()
        self.conn.request("POST", self.target.path, body=body, headers=self.target.headers)
        return self.conn.getresponse()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, socket.timeout):
        return "timeout"
    return (str(exc) if isinstance(exc, BenchError) else f"{type(exc).__name__}: {exc}")[:120]


class Schedule:
    """Hands out request numbers until the count or the duration is used up; keeps outcomes."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.limit = args.num_requests
        if self.limit is None and args.duration is None:
            self.limit = args.concurrency
        self.duration = args.duration
        self.lock = threading.Lock()
        self.sent = 0
        self.started = time.perf_counter()
        self.outcomes: list[Outcome] = []

    def next_index(self) -> int | None:
        with self.lock:
            if self.limit is not None and self.sent >= self.limit:
                return None
            if self.duration is not None and time.perf_counter() - self.started >= self.duration:
                return None
            self.sent += 1
            return self.sent - 1

    def record(self, outcome: Outcome) -> None:
        with self.lock:
            self.outcomes.append(outcome)


def percentile(values: list[float], pct: float) -> float:
    """numpy.percentile's default (linear interpolation between closest ranks)."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def stats_ms(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "p50": None, "p99": None}
    return {
        "mean": round(sum(values) / len(values) * 1000, 3),
        "p50": round(percentile(values, 50) * 1000, 3),
        "p99": round(percentile(values, 99) * 1000, 3),
    }


def report(args: argparse.Namespace, schedule: Schedule) -> dict[str, object]:
    outcomes = schedule.outcomes
    done = [o for o in outcomes if o.ok]
    end = max((o.finished_at for o in outcomes), default=schedule.started)
    duration = max(end - schedule.started, 1e-9)
    output_tokens = sum(o.tokens for o in done)
    input_tokens = sum(o.input_tokens if o.input_tokens is not None else o.words for o in done)
    samples: list[str] = []
    for o in outcomes:
        if not o.ok and o.error not in samples and len(samples) < MAX_ERROR_SAMPLES:
            samples.append(o.error)
    return {
        "ok": True,
        "version": VERSION,
        "concurrency": args.concurrency,
        "requests": len(outcomes),
        "completed": len(done),
        "errors": len(outcomes) - len(done),
        "duration_s": round(duration, 6),
        "output_tokens": output_tokens,
        "input_tokens": input_tokens,
        "output_tok_s": round(output_tokens / duration, 3),
        "total_tok_s": round((output_tokens + input_tokens) / duration, 3),
        "requests_s": round(len(done) / duration, 4),
        "ttft_ms": stats_ms([o.ttft for o in done]),
        "itl_ms": stats_ms([gap for o in done for gap in o.itl]),
        "tpot_ms": stats_ms([(o.e2el - o.ttft) / (o.tokens - 1) for o in done if o.tokens > 1]),
        "e2el_ms": stats_ms([o.e2el for o in done]),
        "error_samples": samples,
    }


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        target = Target(args)
        schedule = Schedule(args)
        workers = [Worker(target, schedule) for _ in range(args.concurrency)]
        threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        result = report(args, schedule)
    except Exception as exc:  # a bug here must still answer in the agreed shape
        result = {"ok": False, "version": VERSION, "error": _describe(exc)}
    sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
