"""A real `vllm serve` process for the real-engine tier: start, wait, talk to it, stop.

The server is the console command a host's unit runs, ``<env>/bin/vllm serve MODEL_DIR ...``,
started in its own session so that stopping it takes its engine-core and worker processes
along. Its output goes to a log file; a start that fails raises with the log's tail.

Startup semantics seen on vLLM 0.32.0 (and relied on by ``wait_healthy``): while it loads,
the server has no listening socket, so ``/health`` is *connection refused*; it never answers
503 while loading. ``/health`` answers 200 with an empty body once the engine is up.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.real_engine.environment import RealEnv
from tests.real_engine.tiny_model import SERVED_NAME

MAX_MODEL_LEN = 1024
# deepseek_v3 passes text through unless a request asks for thinking (chat_template_kwargs
# {"enable_thinking": true}); then it splits <think>...</think> off as `reasoning`. So one
# server shows both, and ordinary chat completions stay plain content.
REASONING_PARSER = "deepseek_v3"
STARTUP_TIMEOUT = float(os.environ.get("REAL_VLLM_STARTUP_TIMEOUT", "420"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_command(env: RealEnv, model_dir: Path, port: int, api_key: str) -> list[str]:
    """What the server runs, as a unit's ExecStart would. The key is on the command line here
    (a random one per run, on loopback); vLLM reads VLLM_API_KEY as well when --api-key is not
    given, which is how a unit should pass it (--api-key wins when both are set)."""
    return [
        str(env.vllm),
        "serve",
        str(model_dir),
        "--served-model-name",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--api-key",
        api_key,
        "--max-model-len",
        str(MAX_MODEL_LEN),
        # The CPU backend runs float32 and bfloat16 (CpuPlatform.supported_dtypes); the tiny
        # model is saved in float32.
        "--dtype",
        "float32",
        "--enforce-eager",
        "--reasoning-parser",
        REASONING_PARSER,
    ]


def server_environment(runtime: Path) -> dict[str, str]:
    """Offline, no usage reports, CPU platform, small KV cache, caches under the test's dir."""
    environ = {
        key: value
        for key, value in os.environ.items()
        # A caller's own vLLM or HF settings must not change what the tier sees.
        if not key.startswith(("VLLM_", "HF_", "TRANSFORMERS_"))
    }
    environ.update(
        {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HOME": str(runtime / "hf"),
            "VLLM_CACHE_ROOT": str(runtime / "vllm-cache"),
            "VLLM_CONFIG_ROOT": str(runtime / "vllm-config"),
            # vLLM otherwise reports usage to its makers over the network.
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            # Explicit, though the CPU build finds it by itself (environment.py).
            "VLLM_TARGET_DEVICE": "cpu",
            # GiB for the KV cache; the default is 4 GiB of the machine's 24.
            "VLLM_CPU_KVCACHE_SPACE": "1",
            # 'auto' (vLLM's default): on 2 cores, one OpenMP thread on core 0, core 1
            # reserved for the API server.
            "VLLM_CPU_OMP_THREADS_BIND": "auto",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return environ


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


@dataclass
class RealServer:
    base_url: str
    api_key: str
    served_name: str
    model_dir: Path
    process: subprocess.Popen[bytes]
    log_path: Path
    command: list[str]
    startup_seconds: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)

    # --- talking to it (stdlib only: the project's venv need not have an HTTP client) -----

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        key: str | bool | None = True,
        timeout: float = 60.0,
    ) -> Response:
        """key=True sends the server's key, a string sends that one, None/False sends none."""
        headers = {"Accept": "*/*"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        token = self.api_key if key is True else key or None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(
            self.base_url + path, data=data, headers=headers, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return Response(answer.status, dict(answer.headers.items()), answer.read())
        except urllib.error.HTTPError as error:
            return Response(error.code, dict(error.headers.items()), error.read())

    def get(self, path: str, **kwargs: Any) -> Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any, **kwargs: Any) -> Response:
        return self.request("POST", path, body, **kwargs)

    def stream(self, path: str, body: Any, *, timeout: float = 120.0) -> list[Any]:
        """A streamed request's server-sent events, each `data:` payload parsed, in order;
        the closing ``[DONE]`` is kept as the string."""
        request = urllib.request.Request(
            self.base_url + path,
            data=json.dumps({**body, "stream": True}).encode(),
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self.api_key}",
            },
            method="POST",
        )
        events: list[Any] = []
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            for raw in answer:
                line = raw.decode("utf-8").strip()
                if not line.startswith("data:"):
                    continue
                payload = line[len("data:") :].strip()
                events.append(payload if payload == "[DONE]" else json.loads(payload))
        return events

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    # --- lifecycle --------------------------------------------------------------------------

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM to the server's process group (API server, engine core, worker), then
        SIGKILL to what is left after `timeout`."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout)
        # Children can outlive the leader; the group id is the leader's pid.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until the group's last process is gone
            try:
                os.killpg(self.process.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        return self.process.returncode


class StartupFailed(RuntimeError):
    pass


def health_status(base_url: str, timeout: float = 5.0) -> int | str:
    """/health's status code, or "refused" / "timeout" / the error's name."""
    try:
        with urllib.request.urlopen(base_url + "/health", timeout=timeout) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except urllib.error.URLError as error:
        reason = error.reason
        if isinstance(reason, ConnectionRefusedError):
            return "refused"
        if isinstance(reason, TimeoutError | socket.timeout):
            return "timeout"
        return type(reason).__name__
    except (ConnectionResetError, ConnectionRefusedError):
        return "refused"
    except TimeoutError:
        return "timeout"


def wait_healthy(server: RealServer, timeout: float = STARTUP_TIMEOUT) -> list[tuple[float, Any]]:
    """Poll /health until 200; returns what it answered on the way (seconds since start, status),
    each change of answer once. Raises StartupFailed if the process exits or time runs out."""
    started = time.monotonic()
    seen: list[tuple[float, Any]] = []
    while True:
        status = health_status(server.base_url)
        if not seen or seen[-1][1] != status:
            seen.append((round(time.monotonic() - started, 1), status))
        if status == 200:
            return seen
        if not server.alive():
            raise StartupFailed(
                f"vllm serve exited {server.process.returncode} before /health answered 200 "
                f"(answers: {seen}); log {server.log_path}, last lines:\n{server.log_tail()}"
            )
        if time.monotonic() - started > timeout:
            raise StartupFailed(
                f"vllm serve did not answer /health 200 within {timeout:.0f} s "
                f"(answers: {seen}); log {server.log_path}, last lines:\n{server.log_tail()}"
            )
        time.sleep(0.5)


def start(env: RealEnv, model_dir: Path, runtime: Path) -> RealServer:
    """Start `vllm serve` on a free port with a fresh random key and wait until it is healthy."""
    runtime.mkdir(parents=True, exist_ok=True)
    port = free_port()
    api_key = "sk-test-" + secrets.token_urlsafe(24)
    command = serve_command(env, model_dir, port, api_key)
    log_path = runtime / "vllm-serve.log"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=server_environment(runtime),
            cwd=runtime,
            start_new_session=True,
        )
    server = RealServer(
        base_url=f"http://127.0.0.1:{port}",
        api_key=api_key,
        served_name=SERVED_NAME,
        model_dir=model_dir,
        process=process,
        log_path=log_path,
        command=command,
    )
    try:
        server.notes["health_while_starting"] = wait_healthy(server)
    except BaseException:
        server.stop()
        raise
    server.startup_seconds = round(time.monotonic() - started, 1)
    return server


@contextlib.contextmanager
def running(env: RealEnv, model_dir: Path, runtime: Path) -> Iterator[RealServer]:
    server = start(env, model_dir, runtime)
    try:
        yield server
    finally:
        server.stop()


def build_model(env: RealEnv, out: Path, seed: int = 0) -> dict[str, Any]:
    """tiny_model.py run in the real-engine venv (torch and transformers live there)."""
    args = [str(out), "--seed", str(seed)]
    return _run_builder(
        env, "tiny_model.py", args, out.parent / "hf", {}, 600, "building the tiny model"
    )


def build_trained_models(env: RealEnv, out: Path) -> dict[str, Any]:
    """trained_models.py run in the real-engine venv: ``out/good`` and ``out/bad``, trained on
    the coherence suite's prompts (one thread: see the script)."""
    threads = {"OMP_NUM_THREADS": "1"}
    return _run_builder(
        env, "trained_models.py", [str(out)], out / "hf", threads, 900, "training the tiny models"
    )


def _run_builder(
    env: RealEnv,
    name: str,
    args: list[str],
    hf_home: Path,
    extra: dict[str, str],
    timeout: int,
    what: str,
) -> dict[str, Any]:
    """A model-building script beside this file, offline, in the real-engine venv: the JSON
    line it prints last."""
    script = Path(__file__).with_name(name)
    environ = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "HF_HOME": str(hf_home), **extra}  # fmt: skip
    done = subprocess.run(
        [str(env.python), str(script), *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{done.stdout}\n{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))
