"""What `vllm serve` makes of its command line: the engine's settings, or how it fails."""

from __future__ import annotations

from dataclasses import dataclass

from .usage import SERVE_PROG

WILDCARD_HOSTS = frozenset({None, "", "0.0.0.0", "::"})  # noqa: S104 - what a bind means


@dataclass(frozen=True)
class CliFailure:
    """An exception vLLM's command line handling raises before the API server starts."""

    where: str  # the function that raised: parse_args, load_config_file, validate_..., ...
    code: str  # the line that raised, as the traceback quotes it
    exception: str  # the traceback's last line(s), e.g. "ValueError: ..."
    logged: str = ""  # what vLLM logged at ERROR just before raising, if anything


class CliCrash(Exception):
    """An exception vLLM's command line handling raises itself (vLLM prints a traceback)."""

    def __init__(self, failure: CliFailure) -> None:
        super().__init__(failure.exception)
        self.failure = failure


@dataclass(frozen=True)
class EngineArgs:
    """What `vllm serve` makes of its command line (the flags that change behaviour)."""

    binary: str
    model_path: str
    served_name: str  # the first --served-model-name (metrics label), or the model
    served_names: tuple[str, ...] = ()  # every name /v1/models lists and requests may use
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    port: int = 8000
    host: str | None = None  # None: all interfaces
    uds: str | None = None  # a unix socket instead of TCP
    headless: bool = False  # engines only, no API server (--headless, --api-server-count 0)
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    quantization: str | None = None
    trust_remote_code: bool = False
    api_key_set: bool = False
    # sha256 of each --api-key: enough to check a request's bearer token, and never the key.
    api_key_sha256: tuple[str, ...] = ()
    tokenizer: str | None = None
    load_format: str = "auto"
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    enforce_eager: bool = False
    enable_prefix_caching: bool | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    # --shutdown-timeout: on SIGTERM, how long the server lets requests in flight finish (new
    # ones get 503) before it aborts the rest; 0, the default, aborts them at once.
    shutdown_timeout: int = 0
    chat_template: str | None = None
    reasoning_parser: str = ""  # chat streams its thinking as delta.reasoning (vLLM 0.32)
    config_file: str | None = None  # `--config PATH`: read when the process starts
    non_default: tuple[tuple[str, object], ...] = ()  # the journal's "non-default args"
    warnings: tuple[str, ...] = ()  # what the parser logged at WARNING
    usage_error: str | None = None  # argparse's message (exit status 2)
    usage_prog: str = SERVE_PROG  # whose usage error: "vllm serve", or "vllm" (unrecognized)
    cli_failure: CliFailure | None = None  # an exception before the server starts (status 1)
    help_requested: bool = False  # --help: prints the help and exits 0

    @property
    def world_size(self) -> int:
        """GPUs of one data-parallel replica."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def gpus_needed(self) -> int:
        return self.world_size * self.data_parallel_size

    @property
    def exit_status(self) -> int | None:
        """How the process ends before it serves anything (None: it goes on to load)."""
        if self.help_requested:
            return 0
        if self.usage_error is not None:
            return 2
        if self.cli_failure is not None:
            return 1
        return None

    @property
    def reads_files(self) -> bool:
        """Whether starting the process reads files whose presence decides the outcome."""
        return self.config_file is not None or self.chat_template is not None

    def serves_http_at(self, url_host: str) -> bool:
        """Whether `curl http://URL_HOST:PORT/` on the host itself reaches this server."""
        if self.headless or self.uds is not None:
            return False
        bound = _bound_families(self.host)
        wanted = {
            "127.0.0.1": {"v4"},
            "0.0.0.0": {"v4"},  # noqa: S104 - connecting to it means loopback
            "localhost": {"v6", "v4"},  # curl tries ::1, then 127.0.0.1
            "::1": {"v6"},
            "[::1]": {"v6"},
        }.get(url_host)
        if wanted is None:  # one of the host's own addresses: only an exact bind answers
            return self.host is not None and self.host == url_host.strip("[]")
        return bool(wanted & bound)

    def binds_clash(self, other: EngineArgs) -> bool:
        """Two servers that cannot both listen (EADDRINUSE for the second)."""
        if self.headless or other.headless or self.uds is not None or other.uds is not None:
            return False
        if self.port != other.port:
            return False
        if self.host in WILDCARD_HOSTS or other.host in WILDCARD_HOSTS:
            return True
        return _normal_host(self.host) == _normal_host(other.host)


def _bound_families(host: str | None) -> set[str]:
    if host in (None, "", "0.0.0.0", "127.0.0.1", "localhost"):  # noqa: S104
        return {"v4"}
    if host == "::":
        return {"v4", "v6"}  # dual-stack by default (net.ipv6.bindv6only=0)
    if host == "::1":
        return {"v6"}
    return set()  # another address: not reachable on loopback


def _normal_host(host: str | None) -> str | None:
    return "127.0.0.1" if host == "localhost" else host
