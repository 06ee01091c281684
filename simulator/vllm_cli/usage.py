"""What `vllm` says about its own usage: program names, usage lines and the `--help` text."""

from __future__ import annotations

SERVE_PROG = "vllm serve"
SERVE_USAGE = "vllm serve [model_tag] [options]"
MAIN_PROG = "vllm"
# As vLLM 0.32 prints it without a terminal (argparse wraps it at 80 columns).
MAIN_USAGE = (
    "vllm [-h] [-v]\n"
    "            {chat,complete,serve,launch,bench,collect-env,download-kernels,preload,"
    "run-batch,snapshot}\n"
    "            ..."
)
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"  # ModelConfig.model's default in vLLM 0.11 and 0.32


def help_lines() -> list[str]:
    """The start of what `vllm serve --help` prints (the journal shows it as the unit's output)."""
    return [
        f"usage: {SERVE_USAGE}",
        "",
        "Launch a local OpenAI-compatible API server to serve LLM",
        f"completions via HTTP. Defaults to {DEFAULT_MODEL} if no model is specified.",
        "",
        "Search by using: `--help=<ConfigGroup>` to explore options by section (e.g.,",
        "--help=ModelConfig, --help=Frontend)",
        "  Use `--help=all` to show all available flags at once.",
        "",
        "Config Groups:",
        "  positional arguments",
        "  options",
        "  Frontend                Arguments for the OpenAI-compatible frontend server.",
        "  ModelConfig             Configuration for the model.",
        "  LoadConfig              Configuration for loading the model weights.",
        "  ParallelConfig          Configuration for the distributed execution.",
        "  CacheConfig             Configuration for the KV cache.",
        "  SchedulerConfig         Scheduler configuration.",
        "  VllmConfig              Dataclass which contains all vllm-related configuration.",
        "",
        "For full list:            vllm serve --help=all",
        "For a section:            vllm serve --help=ModelConfig    (case-insensitive)",
        "For a flag:               vllm serve --help=max-model-len  (_ or - accepted)",
        "Documentation:            https://docs.vllm.ai",
    ]
