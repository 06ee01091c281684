"""How vLLM 0.32 formats what it logs: process prefixes, the logger's line, Python tracebacks."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from ..vllm_cli import core_pid, core_title, worker_pid, worker_title

if TYPE_CHECKING:
    from ..state import Run

SITE = "/opt/vllm/.venv/lib/python3.12/site-packages"
GIB = 1024.0

# uvicorn logs through its own handler: its lines carry no process prefix (vLLM 0.32).
UVICORN = "INFO:     "

# One traceback frame: (file, line, function, the line's code).
Frame = tuple[str, int, str, str]


def stamp(wall: float) -> str:
    """vLLM's logger timestamp: month, day and time, no year."""
    return dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%m-%d %H:%M:%S")


def info(prefix: str, wall: float, where: str, message: str, level: str = "INFO") -> str:
    """One logger line of the process named by `prefix`, from `where` (file:line)."""
    return f"{prefix} {level} {stamp(wall)} [{where}] {message}"


def api(run: Run) -> str:
    """The API server's prefix: each vLLM process prefixes its output with its name and PID."""
    return f"(APIServer pid={run.pid})"


def core(run: Run, dp_rank: int = 0) -> str:
    assert run.engine is not None
    return f"({core_title(dp_rank)} pid={core_pid(run.engine, run.pid, dp_rank)})"


def worker(run: Run, rank: int) -> str:
    assert run.engine is not None
    return f"({worker_title(run.engine, rank)} pid={worker_pid(run.engine, run.pid, rank)})"


def uvicorn_routes(prefix: str, wall: float) -> list[str]:
    """The routes the API server lists before uvicorn starts: those the simulator answers, in
    vLLM 0.32's order (a route registered once per method is listed once per method)."""
    from ..http.routes import ROUTE_TABLE  # the HTTP side owns the table

    lines = [info(prefix, wall, "launcher.py:186", "Available routes are:")]
    for path, methods in ROUTE_TABLE:
        lines.append(info(prefix, wall, "launcher.py:195", f"Route: {path}, Methods: {methods}"))
    return lines


def prefixed(prefix: str, lines: list[str]) -> list[str]:
    """Lines one process printed (a traceback prints line by line under its prefix)."""
    return [f"{prefix} {line}" for line in lines]


def frames(*stack: Frame) -> list[str]:
    """A traceback's frame lines, outermost first; relative paths are in site-packages."""
    lines = []
    for path, line, func, code in stack:
        full = path if path.startswith("/") else f"{SITE}/{path}"
        lines.append(f'  File "{full}", line {line}, in {func}')
        lines.append(f"    {code}")
    return lines


# `vllm serve` down to the API server's coroutine, where most startup failures are raised.
CLI_FRAMES: tuple[Frame, ...] = (
    ("/opt/vllm/.venv/bin/vllm", 10, "<module>", "sys.exit(main())"),
    ("vllm/entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
    ("vllm/entrypoints/cli/serve.py", 60, "cmd", "uvloop.run(run_server(args))"),
)
