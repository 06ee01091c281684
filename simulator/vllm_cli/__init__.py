"""How `vllm serve` reads its command line, as vLLM 0.11's FlexibleArgumentParser does.

The control plane's tests use this as "the engine": whatever list of extra arguments the control
plane accepts, this decides what would really serve. So the reading is argparse's own, not an
imitation of it: the simulator builds an argparse parser with the serve flags of vLLM 0.11 in
the order vLLM registers them, and argparse does the prefix abbreviations (`--tensor-parallel=2`,
an ambiguous `--max` as a usage error), `--flag=value` and `--flag value`, nargs, types, choices,
the last occurrence winning and the exact error messages. What vLLM's FlexibleArgumentParser
does before argparse sees the words is done here step by step in the same order:

1. the first `--model X` / `--model=X` is moved to the front as the positional model (0.11.1+
   keeps `--model` working with a deprecation warning), so a positional model *and* `--model`
   leaves a second positional: `vllm: error: unrecognized arguments: <the positional>`;
2. a `--config PATH` word pair (exactly that spelling: `--config=PATH` is not looked for and
   argparse stores it unread) splices the YAML file's flags in after the model, when the
   process starts (the file is read then, not at daemon-reload);
3. `_` becomes `-` in every `--flag_name` (only the name, up to a `.`), `-O3` becomes
   `-O.level=3`, `--help=x` becomes `--help`;
4. dotted `--group.key value` words are folded into one JSON argument per group.

Then `validate_parsed_serve_args` runs its cheap checks (a chat template that looks like a path
must exist; `--enable-auto-tool-choice` needs `--tool-call-parser`).

Python is 3.11 here and 3.12 on the real hosts; their argparse behaves the same for these cases.
Pure: no I/O, files come through `read_file`. `parse_vllm_argv` never raises.

The package: `engine_args` (what comes out), `usage` (program names and help text), `flags` (the
flag table), `arg_types` and `parser` (argparse built from the table), `flexible` (the steps
before argparse), `parse` (the whole reading) and `process_names` (what the server's processes
are called).
"""

from __future__ import annotations

from .engine_args import CliFailure, EngineArgs
from .flags import LONG_FLAGS
from .parse import parse_vllm_argv, with_environment_key
from .process_names import core_pid, core_title, worker_pid, worker_title
from .usage import MAIN_USAGE, SERVE_USAGE, help_lines

__all__ = [
    "LONG_FLAGS",
    "MAIN_USAGE",
    "SERVE_USAGE",
    "CliFailure",
    "EngineArgs",
    "core_pid",
    "core_title",
    "help_lines",
    "parse_vllm_argv",
    "with_environment_key",
    "worker_pid",
    "worker_title",
]
