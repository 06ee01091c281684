"""How the pinned vLLM's `vllm serve` reads a set of command lines, as JSON.

Runs inside the real-engine venv: ``<env>/bin/python tests/real_engine/dump_serve_argv.py``. For
each command line below it builds the `vllm` parser exactly as dump_flags.py does (vLLM's
FlexibleArgumentParser with the serve subparser) and parses ``serve <words>`` with it, without
reading any file: what argparse and FlexibleArgumentParser answer before anything starts. Each
outcome is one of

- ``{"exit": status, "message": ...}``: argparse's usage error (status 2) or --help (status 0),
  the message as vLLM prints it after the usage line;
- ``{"raise": "Type: message"}``: what FlexibleArgumentParser raises itself (a traceback);
- ``{"ok": {dest: value}}``: the options whose value is not their default.

The cases are the simulator's own examples, the spellings the control plane relies on, and
seeded random words over every option string of the capture (vllm-0.32.0-flags.json), so the
file changes only when vLLM's reading does. tests/simulator/test_vllm_cli_parity.py holds the
simulator to it; tests/real_engine/test_flags.py holds it to the parser.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import dump_flags  # noqa: E402

MODEL = "/models/m"
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")

CASES: list[list[str]] = [
    [MODEL, "--max=4096"],
    [MODEL, "--h"],
    [MODEL, "--foo", "bar"],
    [MODEL, "--port=x"],
    [MODEL, "--trust-remote-code=yes"],
    [MODEL, "-q", "int3"],
    [MODEL, "--dtype", "fp16"],
    [MODEL, "--max-model-len=lots"],
    [MODEL, "--served-model-name"],
    [MODEL, "-tp", "2", "-pp", "2", "-dp", "2", "-q", "modelopt_fp4"],
    [MODEL, "--served-model-name", "kimi", "kimi-k2.5", "--port", "8001"],
    ["--served-model-name", "a", MODEL],
    ["--model", "/models/x"],
    ["-tp", "2", "--model=/models/x"],
    [MODEL, "--model=/models/other"],
    [MODEL, "--model"],
    [],
    [MODEL, "--host="],
    [MODEL, "--host", "None"],
    [MODEL, "--uds", "/run/vllm.sock", "--headless"],
    [MODEL, "--api-server-count=0"],
    [MODEL, "--enable-prefix-caching"],
    [MODEL, "--no-enable-prefix-caching"],
    [MODEL, "--max-model-len=32k"],
    [MODEL, "--max-model-len=32K"],
    [MODEL, "--max-model-len=auto"],
    [MODEL, "--max-model-len=-1"],
    [
        MODEL,
        "--max-num-seqs=64",
        "--max-num-batched-tokens=16k",
        "--kv-cache-dtype=fp8",
        "--dtype=bfloat16",
        "--disable-log-stats",
        "--enable-chunked-prefill",
        "--allowed-local-media-path=/srv/media",
        "--tokenizer=/models/tok",
        "--revision=main",
        "--load-format=dummy",
        "--enable-expert-parallel",
    ],
    [MODEL, "--swap-space=8"],
    [MODEL, "--disable-log-requests"],
    [MODEL, "--task", "embed"],
    [MODEL, "--task=generate"],
    [MODEL, "--api-key", "sekret", "--hf-token=xyz123"],
    [MODEL, "--hf-token"],
    [MODEL, "--help", "--foo"],
    [MODEL, "--help=ModelConfig"],
    [MODEL, "--hel"],
    [MODEL, "--compilation-config.level", "3"],
    [MODEL, "--compilation-config.mode", "3", "-O3"],
    [MODEL, "-cc.mode=3"],
    [MODEL, "-cc.mode=3", "--compilation-config.mode=2"],
    [MODEL, "-cc.max_cudagraph_capture_size=1k"],
    [MODEL, "-O", "3"],
    [MODEL, "-O=1"],
    [MODEL, "-Odecode"],
    [MODEL, "-O"],
    [MODEL, "--compilation-config.mode"],
    [MODEL, "--config-format=hf"],
    [MODEL, "--enable-lora"],
    [MODEL, "--served-model=x", "--trust-remote", "--gpu-memory-util=0.5"],
    [MODEL, "--device-memory-utilization", "0.5"],
    [MODEL, "--device-mem=0.5"],
    [MODEL, "--max-log-len", "x"],
    [MODEL, "--max-log-len", "None"],
    [MODEL, "--seed", "None"],
    [MODEL, "--seed", "-1"],
    [MODEL, "--max-num-seqs", "None"],
    [MODEL, "--block-size", "17"],
    [MODEL, "--max-lora-rank", "7"],
    [MODEL, "--device-ids", "2,3,GPU-abc"],
    [MODEL, "--moe-backend", "Deep-GEMM"],
    [MODEL, "--moe-backend", "nope"],
    [MODEL, "--speculative-config", "x"],
    [MODEL, "--speculative-config", '{"model": "/models/draft"}'],
    [MODEL, "-sc.model", "/models/draft"],
    [MODEL, "--kv-transfer-config", "x"],
    [MODEL, "--kv-transfer-config", "[1]"],
    [MODEL, "--kv-transfer-config", "80k"],
    [MODEL, "--compilation-config", ""],
    [MODEL, "--compilation-config", "None"],
    [MODEL, "--additional-config", "x"],
    [MODEL, "--additional-config", '{"a": 1}'],
    [MODEL, "--hf-overrides", '{"a": 1}'],
    [MODEL, "--limit-mm-per-prompt", "x"],
    [MODEL, "--limit-mm-per-prompt", '{"image": 2}'],
    [MODEL, "--override-generation-config", "x"],
    [MODEL, "--mm-processor-kwargs", "x"],
    [MODEL, "--default-chat-template-kwargs", "x"],
    [MODEL, "--allowed-origins", "x"],
    [MODEL, "--allowed-origins", '["https://a.example"]'],
    [MODEL, "--middleware", "a", "--middleware", "b"],
    [MODEL, "--log-level", "debug"],
    [MODEL, "--log-level", "loud"],
    [MODEL, "--quantization", "None"],
    [MODEL, "--spec-method", "nope"],
    [MODEL, "--spec-method", "None"],
    [MODEL, "--safetensors-load-strategy", "None"],
    [MODEL, "--max-num-batched-tokens", "1.5K"],
    [MODEL, "--max-num-batched-tokens", "2T"],
    [MODEL, "--grpc"],
    [MODEL, "--grpc-port", "50051"],
    [MODEL, "--kda-decode-backend", "x"],
    [MODEL, "--mm-processor-device", "x"],
    [MODEL, "--enable-log-outputs"],
    [MODEL, "--no-trust-remote-code"],
    [MODEL, "--data-parallel-hybrid-lb"],
    [MODEL, "-dph"],
    [MODEL, "-ep"],
    [MODEL, "--no-data-parallel-hybrid-lb"],
    [MODEL, "--tensor_parallel_size=2"],
    [MODEL, "--tensor-parallel=2"],
    [MODEL, "-tp=2"],
    [MODEL, "--tensor-parallel-size", "8", "--tensor-parallel-size=2"],
    [MODEL, "--served_model_name=my_model"],
    [MODEL, "--served_model_name", "my_model"],
    [MODEL, "--dis"],
    [MODEL, "--disable-log"],
    [MODEL, "--enable-l"],
    [MODEL, "--enable-lor"],
    [MODEL, "--api"],
    [MODEL, "--api-k", "x"],
    [MODEL, "--reasoning-parser", "qwen3"],
    [MODEL, "--watermark", "0.1"],
    [MODEL, "--gpu-memory-utilization", "7"],
    [MODEL, "--port", "8000", "--host", "127.0.0.1", "--enforce-eager"],
]


def _random_cases(flags: list[str], count: int, seed: int) -> list[list[str]]:
    """Words as people and hypothesis type them: flags whole, with values, underscored,
    abbreviated, short options, stray words."""
    rng = random.Random(seed)
    values = ["8", "0", "-1", "0.5", "None", "", "fp8", MODEL, "/models/x.yaml", "a.b", "{}",
              '{"a": 1}', "auto", "32k", "x"]  # fmt: skip
    shorts = ["-tp", "-pp", "-dp", "-q", "-O", "-O3", "--", "-", "--help", "-cc", "-sc", "-ep"]

    def word() -> str:
        roll = rng.random()
        flag = rng.choice(flags)
        if roll < 0.25:
            return flag
        if roll < 0.4:
            return f"{flag}={rng.choice(values)}"
        if roll < 0.5:
            return "--" + flag[2:].replace("-", "_")
        if roll < 0.65:
            return flag[: rng.randint(3, 30)]
        if roll < 0.75:
            return rng.choice(shorts)
        return rng.choice(values)

    return [[MODEL, *(word() for _ in range(rng.randint(0, 5)))] for _ in range(count)]


def all_cases() -> list[list[str]]:
    capture = json.loads((HERE / "captures" / "vllm-0.32.0-flags.json").read_text())
    flags = sorted(n for o in capture["options"] for n in o["option_strings"] if n[:2] == "--")
    return [*CASES, *_random_cases(flags, 400, seed=19)]


class _Exit(Exception):
    def __init__(self, status: int, message: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _build() -> Any:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    root = FlexibleArgumentParser(prog="vllm")
    subparsers = root.add_subparsers(dest="subparser")
    serve = make_arg_parser(
        subparsers.add_parser("serve", usage="vllm serve [model_tag] [options]")
    )
    for parser in (root, serve):

        def leave(status: int = 0, message: str | None = None) -> Any:
            raise _Exit(status, message)

        parser.exit = leave  # type: ignore[method-assign]
        parser.print_usage = lambda file=None: None  # type: ignore[method-assign]
        parser.print_help = lambda file=None: None  # type: ignore[method-assign]
    return root


def _outcome(argv: list[str], defaults: dict[str, Any]) -> dict[str, Any]:
    root = _build()
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            namespace = root.parse_args(["serve", *argv])
    except _Exit as exc:
        message = None if exc.message is None else _ADDRESS.sub("", exc.message)
        return {"exit": exc.status, "message": message}
    except Exception as exc:  # what vLLM would print a traceback for
        return {"raise": _ADDRESS.sub("", f"{type(exc).__name__}: {exc}")}
    values = {k: dump_flags._plain(v) for k, v in vars(namespace).items()}
    return {"ok": {k: v for k, v in values.items() if k not in defaults or defaults[k] != v}}


def main() -> int:
    sys.argv = [sys.argv[0], "--help-texts"]  # as dump_flags.py: the whole parser
    import vllm

    first = _build()
    with contextlib.redirect_stderr(io.StringIO()):
        defaults = {k: dump_flags._plain(v) for k, v in vars(first.parse_args(["serve"])).items()}
    cases = [{"argv": argv, **_outcome(argv, defaults)} for argv in all_cases()]
    head = json.dumps({"vllm_version": vllm.__version__, "command": "vllm serve"})
    lines = ",\n".join(json.dumps(case, ensure_ascii=False) for case in cases)
    sys.stdout.write(f'{head[:-1]}, "cases": [\n{lines}\n]}}\n')  # one case a line
    return 0


if __name__ == "__main__":
    sys.exit(main())
