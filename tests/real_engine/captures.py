"""Captures: what the real engine answered, kept as JSON under tests/real_engine/captures/.

Each real-engine test records what it saw here, so the simulator can be held to it by parity
tests that need no real engine. A capture holds only what does not change from run to run:
ids, timestamps, ports, pids, paths, the random key and the random model's words are replaced
by placeholders, so a capture changes (and shows in `git diff`) only when vLLM's behaviour does.
A file is rewritten only when its content differs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

CAPTURES = Path(__file__).with_name("captures")

# Keys whose values differ on every request or every run.
_VOLATILE = {
    "id": "<id>",
    "created": "<unix time>",
    "root": "<model dir>",
    "system_fingerprint": "<fingerprint>",
}
_TEXT_KEYS = {"text", "content", "reasoning"}


def write(name: str, document: dict[str, Any]) -> Path:
    CAPTURES.mkdir(exist_ok=True)
    path = CAPTURES / f"{name}.json"
    text = json.dumps(document, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def read(name: str) -> Any:
    return json.loads((CAPTURES / f"{name}.json").read_text(encoding="utf-8"))


def normalise(value: Any, *, words: bool = True) -> Any:
    """Volatile values replaced; with words=True, generated text too: "" stays "" (that it is
    empty is the fact), anything else becomes "<text>"."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in _VOLATILE and item is not None:
                out[key] = _VOLATILE[key]
            elif words and key in _TEXT_KEYS and isinstance(item, str):
                out[key] = item if item == "" else "<text>"
            else:
                out[key] = normalise(item, words=words)
        return out
    if isinstance(value, list):
        return [normalise(item, words=words) for item in value]
    return value


_LOG_PATTERNS = [
    # (APIServer pid=5899) INFO 12-02 06:54:52 [api_utils.py:286] ...
    (re.compile(r"pid=\d+"), "pid=<pid>"),
    (re.compile(r"\b\d{2}-\d{2} \d{2}:\d{2}:\d{2}\b"), "<MM-DD hh:mm:ss>"),
    (re.compile(r"\[W\d{4} \d{2}:\d{2}:\d{2}\.\d+ "), "[W<MMDD hh:mm:ss.ns> "),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
    (re.compile(r"'port': \d+"), "'port': <port>"),
    (re.compile(r"--port \d+"), "--port <port>"),
    (re.compile(r"main\(\d+\)"), "main(<fd>)"),
    (re.compile(r"process \[\d+\]"), "process [<pid>]"),
    (re.compile(r"/tmp/[^\s'\",}]*"), "<tmp path>"),
    (re.compile(r"sk-test-[A-Za-z0-9_-]+"), "<api key>"),
]


def normalise_log_line(line: str, replacements: dict[str, str] | None = None) -> str:
    for literal, placeholder in (replacements or {}).items():
        line = line.replace(literal, placeholder)
    for pattern, placeholder in _LOG_PATTERNS:
        line = pattern.sub(placeholder, line)
    return line.rstrip()
