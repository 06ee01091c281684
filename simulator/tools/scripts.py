"""A script sent to a host's Python on stdin, run for real on the simulator's machine.

`<python> [-I] - args...` runs `sys.executable -I - args...` in a subprocess, with the script
on its stdin, in an empty temporary directory, bounded by SCRIPT_TIMEOUT_SECONDS; its stdout,
stderr and exit status are the command's. Before that, every argument's loopback URL
(`http://127.0.0.1:PORT`, `http://localhost:PORT`, the rest of the URL kept) is rewritten to the
fleet's streaming HTTP server with a prefix naming this host and port, e.g.
`http://127.0.0.1:45123/sim/gpu-01/8000`, so a benchmark client reaches the simulated server
it names; a URL whose server is not answering now goes to a port that refuses connections.
Only arguments are rewritten, never the script, and nothing else confines what it does: the
simulator is a test tool on the loopback, and only the fleet's client key can send scripts.
The script's environment is PATH, LANG, HOME (the temporary directory) and any `NAME=value`
words that preceded the command.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import tempfile

from .. import real_engine
from ..http import loopback
from .interface import Context, Result

SCRIPT_TIMEOUT_SECONDS = 900.0
_LOOPBACK_URL = re.compile(r"http://(127\.0\.0\.1|localhost)(?::(\d{1,5}))?(?=[/?#\s]|$)")


def rewrite(arg: str, host: str, server: loopback.LoopbackServer) -> str:
    """`arg` with each loopback URL pointing at the fleet's server for `host`."""

    def replace(match: re.Match[str]) -> str:
        url_host, port = match.group(1), int(match.group(2) or 80)
        real = real_engine.url_for(server.machines(host), url_host, port)  # a real vLLM's port
        return real or server.url_for(host, url_host, port)

    return _LOOPBACK_URL.sub(replace, arg)


async def run(ctx: Context, script: str, args: list[str]) -> Result:
    """Run the script; its output and status, or why it could not run."""
    machine = ctx.machine
    server = loopback.server_for(machine)
    if server is None:
        return Result().err("python3: this simulated host has no HTTP server for scripts\n").exit(1)
    argv = [rewrite(a, machine.name, server) for a in args]
    with tempfile.TemporaryDirectory(prefix="simhost-script-") as home:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": home,
            **ctx.env,
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-",
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=home,
            env=env,
            start_new_session=True,  # its threads and children go with it on a timeout
        )
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(script.encode()), SCRIPT_TIMEOUT_SECONDS
            )
        except asyncio.CancelledError:  # the session went away: so does the script
            _kill(proc)
            raise
        except TimeoutError:
            _kill(proc)
            await proc.wait()
            return (
                Result()
                .err(
                    f"simulated host: the script ran longer than {SCRIPT_TIMEOUT_SECONDS:g} s "
                    "and was killed\n"
                )
                .exit(137)
            )
    result = Result()
    if out:
        result.out(out.decode("utf-8", "replace"))
    if err:
        result.err(err.decode("utf-8", "replace"))
    code = proc.returncode or 0
    return result.exit(128 - code if code < 0 else code)  # killed by a signal: 128 + signal


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
