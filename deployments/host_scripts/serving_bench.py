"""Serving benchmark client: streams completions from an OpenAI-compatible server, times tokens.

Runs on a GPU host with the engine's own Python, fed on stdin (`python3 -I - --url ...`), so it
uses the standard library only and runs on Python 3.9 and later. It prints exactly one JSON
object on stdout and exits 0 whenever it printed it; a failing server (connection refused, HTTP
4xx/5xx, a timeout) is counted in `errors`, with up to five short samples.

Metrics follow `vllm bench serve` (vllm/benchmarks/lib/endpoint_request_func.py):

- A token chunk is a streamed chunk that carries a choice, whatever its text: a token that ends
  inside a UTF-8 character streams as "" and is still a token, and so is a chat delta that
  carries only `reasoning` (vLLM 0.32) or `reasoning_content` (older). The trailing usage chunk
  (no choices) is not one.
- TTFT: from sending the request to the first token chunk (a reasoning model's first thought).
- ITL (`itl_ms`): the gaps between successive token chunks, one sample per chunk, as vllm bench
  serve reports it: with `--stream-interval 4` a chunk carries four tokens and one gap.
- ITL per token (`itl_per_token_ms`): when the server reports usage in every chunk
  (`continuous_usage_stats`, which vLLM honours) and a chunk carries k tokens, its gap counts as
  k gaps of gap/k; without usage it equals ITL. Output version 1 had only this, named itl_ms.
- TPOT: per request, (E2EL - TTFT) / (output tokens - 1), for requests with more than one token.
- E2EL: from sending the request to its last token chunk. Requests/s counts completed ones.
- Output throughput: output tokens over the duration (first send to last end); total adds input.
- Token counts come from the server's `usage`, else the token chunks and the prompt's planned
  length.
- Where this differs: a chat chunk with only the assistant's role is not a token (vLLM's own
  benchmark takes it as the first chunk; vLLM sends it with the first token, so TTFT is the
  same, but vllm bench serve then counts a near-zero ITL sample for it). Percentiles are
  numpy's default (linear).

Prompts are synthetic and deterministic: request i of seed s draws words from a fixed list of
common English words (random.Random(s * 1000003 + i)), so a prefix cache does not flatter the
numbers. `--input-tokens N` is counted in the model's tokens with the server's `/tokenize`
(vLLM): before the clock starts, the client asks it once for "the" and once for "the WORD" for
each word of the list (about a hundred short calls a run, none while measuring), and builds each
prompt as "the" and words until the server's count is N (special tokens such as a BOS
included, as the server's usage counts them). A server without `/tokenize` (SGLang, older
servers), or one whose counts do not add up word by word, gets N words instead, about N tokens,
and `notes` says so; the run goes on either way. `input_tokens_asked` is N and
`input_tokens_sent` what each request sent (the server's usage, else the planned count), and
`input_counted_by` says how the prompts were sized ("tokenize", "words" or "prompts"). For chat,
N is the user message's length: the chat template's tokens come on top, as in vllm bench serve.
`--prompt TEXT` (repeatable) is a fixed prompt set instead: request i sends the (i mod n)-th
(vllm bench serve's custom dataset).

Bad arguments exit 2 with argparse's usage and no JSON; anything else unexpected prints
{"ok": false, "error": ...}. The API key, if any, is never an argument (`ps` on the host would
show it): the control plane sets `API_KEY` below in the copy of this script it sends on stdin
(host_scripts.serving_bench_source); run by hand, `--api-key-env NAME` reads it from the
environment.
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

# 2: itl_ms per chunk (vllm bench serve's ITL) and itl_per_token_ms; input_tokens_asked/sent,
# input_counted_by and notes. 1 had itl_ms per token and counted the input in words.
VERSION = 2
# The server's API key: this exact line is replaced in the copy sent to a host whose server
# takes one (host_scripts.serving_bench_source). Empty: no key, or --api-key-env.
API_KEY = ""
MAX_ERROR_SAMPLES = 5
MAX_NOTES = 5
FIRST_WORD = "the"  # every sized prompt starts with it: its cost is measured with the specials
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


def _word_stream(seed: int, index: int) -> random.Random:
    return random.Random(seed * 1000003 + index)


def prompt_for(seed: int, index: int, words: int, prompts: list[str] | None = None) -> str:
    """Request `index`'s prompt of `words` words (or the fixed set's), without /tokenize."""
    if prompts:
        return prompts[index % len(prompts)]
    rng = _word_stream(seed, index)
    return " ".join(rng.choice(WORDS) for _ in range(words))


class Unavailable(Exception):
    """The server cannot count tokens for us; the message says why (it becomes a note)."""


class Prompts:
    """The prompts of a run, sized in the model's tokens when the server's /tokenize counts.

    `prepare` runs before the clock: one /tokenize call for FIRST_WORD (with whatever special
    tokens the server adds) and one for FIRST_WORD and each word of the list; a word's cost is
    the difference, the same wherever it stands (tokenizers split on spaces before they merge).
    One more call checks the sum on request 0's prompt. After that a prompt of any length is
    built without asking again (cached per run).
    """

    def __init__(self, target: Target, args: argparse.Namespace) -> None:
        self.target = target
        self.args = args
        self.fixed = list(args.prompt)
        self.asked: int | None = None if self.fixed else args.input_tokens
        self.counted_by = "prompts" if self.fixed else "words"
        self.notes: list[str] = []
        self.base = 0  # tokens of FIRST_WORD alone, special tokens included
        self.costs: dict[str, int] = {}

    def note(self, text: str) -> None:
        if text not in self.notes and len(self.notes) < MAX_NOTES:
            self.notes.append(text[:200])

    def prepare(self) -> None:
        if self.fixed:
            return
        try:
            self.base = self.target.count_tokens(FIRST_WORD)
            for word in dict.fromkeys(WORDS):
                cost = self.target.count_tokens(FIRST_WORD + " " + word) - self.base
                if cost < 1:
                    raise Unavailable(f"/tokenize counted {cost} tokens for {word!r}")
                self.costs[word] = cost
            self.counted_by = "tokenize"
            text, planned = self.prompt(0)
            counted = self.target.count_tokens(text)
        except Unavailable as exc:
            self.costs, self.counted_by = {}, "words"
            self.note(f"{exc}: each prompt is {self.asked} words, about {self.asked} tokens")
            return
        if counted != planned:  # the counts do not add up word by word on this tokenizer
            self.costs, self.counted_by = {}, "words"
            self.note(
                f"/tokenize counted {counted} tokens for a prompt sized to {planned} word by "
                f"word: each prompt is {self.asked} words, about {self.asked} tokens"
            )

    def prompt(self, index: int) -> tuple[str, int]:
        """(request `index`'s prompt, its planned length in tokens)."""
        args = self.args
        if not self.costs:
            text = prompt_for(args.seed, index, args.input_tokens, self.fixed)
            return text, len(text.split())
        rng = _word_stream(args.seed, index)
        words, remaining = [FIRST_WORD], args.input_tokens - self.base
        while remaining > 0:
            word = rng.choice(WORDS)
            if self.costs[word] > remaining:  # the last few tokens: a word that fits
                fitting = [w for w in WORDS if self.costs[w] <= remaining]
                if not fitting:
                    break
                word = rng.choice(fitting)
            words.append(word)
            remaining -= self.costs[word]
        if remaining and index == 0:  # every prompt is built alike: say it once
            self.note(
                f"prompts are {args.input_tokens - remaining} tokens: the closest the "
                f"server's tokenizer allows to {args.input_tokens}"
            )
        return " ".join(words), args.input_tokens - remaining


class Target:
    """Where requests go and what they carry (everything but the prompt)."""

    def __init__(self, args: argparse.Namespace) -> None:
        url = urlsplit(args.url)
        self.https = url.scheme == "https"
        self.host = url.hostname or ""
        self.port = url.port or (443 if self.https else 80)
        suffix = "/v1/chat/completions" if args.endpoint == "chat" else "/v1/completions"
        self.path = url.path.rstrip("/") + suffix
        self.tokenize_path = url.path.rstrip("/") + "/tokenize"
        self.chat = args.endpoint == "chat"
        self.args = args
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        key = API_KEY or (os.environ.get(args.api_key_env, "") if args.api_key_env else "")
        if key:
            self.headers["Authorization"] = "Bearer " + key
        self._counter: http.client.HTTPConnection | None = None

    def connect(self) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return kind(self.host, self.port, timeout=self.args.timeout)

    def count_tokens(self, text: str) -> int:
        """The server's count of `text` in the model's tokens (POST /tokenize, as vLLM serves
        it: special tokens included, as a completion's usage counts them); Unavailable when it
        cannot say."""
        body = json.dumps({"model": self.args.model, "prompt": text}).encode()
        headers = {k: v for k, v in self.headers.items() if k != "Accept"}
        try:
            if self._counter is None:
                self._counter = self.connect()
            self._counter.request("POST", self.tokenize_path, body=body, headers=headers)
            response = self._counter.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.close_counter()
            raise Unavailable("/tokenize did not answer (" + _describe(exc) + ")") from exc
        if response.status != 200:
            raise Unavailable(f"the server has no /tokenize (HTTP {response.status})")
        try:
            count = json.loads(raw.decode("utf-8", "replace")).get("count")
        except (ValueError, AttributeError):
            count = None
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise Unavailable("/tokenize answered without a count")
        return count

    def close_counter(self) -> None:
        if self._counter is not None:
            self._counter.close()
            self._counter = None

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

    def __init__(self, planned: int) -> None:
        self.ok = False
        self.error = ""
        self.ttft = 0.0
        self.e2el = 0.0
        self.itl: list[float] = []  # one gap per token chunk (vllm bench serve's ITL)
        self.itl_per_token: list[float] = []  # a chunk's gap split over its tokens
        self.chunks = 0
        self.output_tokens: int | None = None  # from usage
        self.input_tokens: int | None = None  # from usage
        self.planned = planned  # the prompt's length as built: tokens, or words without /tokenize
        self.finished_at = 0.0  # perf_counter

    @property
    def tokens(self) -> int:
        return self.output_tokens if self.output_tokens is not None else self.chunks

    @property
    def sent(self) -> int:
        """The prompt's tokens: the server's usage, else as planned."""
        return self.input_tokens if self.input_tokens is not None else self.planned


_DELTA_PARTS = ("content", "reasoning", "reasoning_content", "tool_calls")


def _carries_token(data: dict[str, object], chat: bool) -> bool:
    """Whether a chunk carries generated tokens: any choice does, as vllm bench serve takes it,
    even with empty text (a token ending inside a UTF-8 character) or only reasoning, except
    the chat stream's opening chunk that carries the assistant's role and nothing else."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return False
    if not chat:
        return True
    delta = choices[0].get("delta")
    if not isinstance(delta, dict):
        return True
    return "role" not in delta or any(delta.get(k) for k in _DELTA_PARTS)


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
    seen_tokens = 0  # the usage count at the last token chunk, for per-token ITL
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
        if _carries_token(data, chat):
            if outcome.chunks == 0:
                outcome.ttft = now - sent
            else:
                gap = now - last
                outcome.itl.append(gap)
                count = done - seen_tokens if done is not None and done > seen_tokens else 1
                outcome.itl_per_token.extend([gap / count] * count)
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

    def __init__(self, target: Target, schedule: Schedule, prompts: Prompts) -> None:
        self.target = target
        self.schedule = schedule
        self.prompts = prompts
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
        prompt, planned = self.prompts.prompt(index)
        outcome = Outcome(planned)
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


def counts(values: list[int]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "min": None, "max": None}
    return {"mean": round(sum(values) / len(values), 3), "min": min(values), "max": max(values)}


def report(args: argparse.Namespace, schedule: Schedule, prompts: Prompts) -> dict[str, object]:
    outcomes = schedule.outcomes
    done = [o for o in outcomes if o.ok]
    end = max((o.finished_at for o in outcomes), default=schedule.started)
    duration = max(end - schedule.started, 1e-9)
    output_tokens = sum(o.tokens for o in done)
    input_tokens = sum(o.sent for o in done)
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
        "input_tokens_asked": prompts.asked,
        "input_tokens_sent": counts([o.sent for o in done]),
        "input_counted_by": prompts.counted_by,
        "output_tok_s": round(output_tokens / duration, 3),
        "total_tok_s": round((output_tokens + input_tokens) / duration, 3),
        "requests_s": round(len(done) / duration, 4),
        "ttft_ms": stats_ms([o.ttft for o in done]),
        "itl_ms": stats_ms([gap for o in done for gap in o.itl]),
        "itl_per_token_ms": stats_ms([gap for o in done for gap in o.itl_per_token]),
        "tpot_ms": stats_ms([(o.e2el - o.ttft) / (o.tokens - 1) for o in done if o.tokens > 1]),
        "e2el_ms": stats_ms([o.e2el for o in done]),
        "error_samples": samples,
        "notes": list(prompts.notes),
    }


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        target = Target(args)
        prompts = Prompts(target, args)
        prompts.prepare()  # before the clock: its /tokenize calls are not measured
        target.close_counter()
        schedule = Schedule(args)
        workers = [Worker(target, schedule, prompts) for _ in range(args.concurrency)]
        threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        result = report(args, schedule, prompts)
    except Exception as exc:  # a bug here must still answer in the agreed shape
        result = {"ok": False, "version": VERSION, "error": _describe(exc)}
    sys.stdout.write(json.dumps(result, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
