"""The engine's interpreters: `vllm --version`, the integrity check, pip, and scripts on stdin.

`<python> -I -c INTEGRITY_SCRIPT dist` is answered from the machine's state (no code runs).
`<python> -m pip ...` is the simulated pip (`pip`). `<python> [-I] - args...` with a script
on stdin runs that script for real (`scripts`): the benchmark client the control plane sends
really measures the simulated server. Anything else is refused with a message saying so.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable

from .. import catalog
from . import pip, scripts
from .interface import Context, Result

ENGINE_PYTHONS = frozenset({"/opt/vllm/.venv/bin/python3", "/opt/vllm/.venv/bin/python"})
SYSTEM_PYTHON_VERSION = "Python 3.12.3"
_FLAGS = set("IEsSBuq")  # interpreter options that take no value and change nothing here
_INTEGRITY_MARK = "metadata.distribution"  # the control plane's integrity script uses it


def interpreters() -> frozenset[str]:
    """The full paths the shell runs without finding them in /usr/bin (the engine's venv)."""
    return ENGINE_PYTHONS | {catalog.VLLM_BINARY}


def _is_python(name: str) -> bool:
    return name in ENGINE_PYTHONS or name.rsplit("/", 1)[-1] in ("python", "python3")


def _split(args: list[str]) -> tuple[str, str | None, list[str]]:
    """(mode, its value, the rest): mode is "-c", "-m", "-", "file", "version" or "" (none)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-V", "--version"):
            return "version", None, []
        if arg in ("-c", "-m"):
            if i + 1 >= len(args):
                return arg, None, []
            return arg, args[i + 1], args[i + 2 :]
        if arg == "-":
            return "-", None, args[i + 1 :]
        if arg.startswith("-") and len(arg) > 1 and set(arg[1:]) <= _FLAGS:
            i += 1
            continue
        return "file", arg, args[i + 1 :]
    return "", None, []


def needs_stdin(name: str, argv: list[str]) -> bool:
    """A python reading its script from stdin (`-`) waits for it."""
    return _is_python(name) and _split(argv[1:])[0] == "-"


def python(ctx: Context, argv: list[str], stdin: str) -> Result | Awaitable[Result]:
    """vllm --version, the integrity check, pip, or a script from stdin."""
    result = Result()
    interpreter = argv[0]
    if interpreter == catalog.VLLM_BINARY or interpreter == "vllm":
        if argv[1:] in (["--version"], ["-v"]):
            return result.out(catalog.VLLM_VERSION + "\n")
        return result.err(
            "vllm: this simulated host runs vLLM only through its systemd units\n"
        ).exit(1)
    engine = interpreter in ENGINE_PYTHONS
    mode, value, rest = _split(argv[1:])
    if mode == "version":
        return result.out(SYSTEM_PYTHON_VERSION + "\n")
    if mode in ("-c", "-m") and value is None:
        return result.err(
            f"Argument expected for the {mode} option\n"
            f"usage: {interpreter} [option] ... [-c cmd | -m mod | file | -] [arg] ...\n"
            "Try `python -h' for more information.\n"
        ).exit(2)
    if mode == "-m" and value == "pip":
        return pip.pip(ctx, interpreter, rest, engine=engine)
    if mode == "-" and _INTEGRITY_MARK not in stdin:
        return scripts.run(ctx, stdin, rest)
    script = value if mode == "-c" else stdin if mode == "-" else None
    if script is None or _INTEGRITY_MARK not in script:
        return result.err(
            f"{interpreter}: this simulated host runs only the control plane's integrity check, "
            "pip, and scripts on stdin\n"
        ).exit(1)
    return _integrity(ctx, rest, engine)


def _integrity(ctx: Context, script_args: list[str], engine: bool) -> Result:
    """What the control plane's integrity script prints, from the machine's state."""
    result = Result()
    if not script_args:
        return result.err(
            "Traceback (most recent call last):\n"
            '  File "<string>", line 4, in <module>\n'
            "IndexError: list index out of range\n"
        ).exit(1)
    dist = script_args[0]
    report = ctx.machine.integrity(dist) if engine else None
    if report is None:
        return result.out(
            json.dumps({"error": "distribution not installed", "dist": dist}) + "\n"
        ).exit(3)
    return result.out(json.dumps(report) + "\n")
