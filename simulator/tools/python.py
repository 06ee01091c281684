"""The engine's interpreters: `vllm --version`, and python running the integrity check only."""

from __future__ import annotations

import json

from .. import catalog
from .interface import Context, Result

ENGINE_PYTHONS = frozenset({"/opt/vllm/.venv/bin/python3", "/opt/vllm/.venv/bin/python"})
SYSTEM_PYTHON_VERSION = "Python 3.12.3"


def interpreters() -> frozenset[str]:
    """The full paths the shell runs without finding them in /usr/bin (the engine's venv)."""
    return ENGINE_PYTHONS | {catalog.VLLM_BINARY}


def python(ctx: Context, argv: list[str], stdin: str) -> Result:
    """The engine's interpreter runs the integrity script and nothing else: no code is run."""
    result = Result()
    interpreter = argv[0]
    if interpreter == catalog.VLLM_BINARY or interpreter == "vllm":
        if argv[1:] in (["--version"], ["-v"]):
            return result.out(catalog.VLLM_VERSION + "\n")
        return result.err(
            "vllm: this simulated host runs vLLM only through its systemd units\n"
        ).exit(1)
    engine = interpreter in ENGINE_PYTHONS
    args = argv[1:]
    script: str | None = None
    script_args: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-V", "--version"):
            return result.out(SYSTEM_PYTHON_VERSION + "\n")
        if arg == "-c":
            if i + 1 >= len(args):
                return result.err(
                    "Argument expected for the -c option\n"
                    f"usage: {interpreter} [option] ... [-c cmd | -m mod | file | -] [arg] ...\n"
                    "Try `python -h' for more information.\n"
                ).exit(2)
            script = args[i + 1]
            script_args = args[i + 2 :]
            break
        if arg.startswith("-") and len(arg) > 1 and set(arg[1:]) <= set("IEsSBuq"):
            i += 1
            continue
        break
    if script is None or "metadata.distribution" not in script:
        return result.err(
            f"{interpreter}: this simulated host only runs the control plane's integrity check\n"
        ).exit(1)
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
