"""`vllm serve`'s command line as the simulated engine reads it: argparse, as vLLM 0.32 drives it.

Pure tests of `parse_vllm_argv`: what serves (model, names, parallelism, port, host) for a given
command line, the usage errors vLLM prints, and that no input makes the parser raise.
"""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import catalog
from simulator.state import parse_unit_file
from simulator.vllm_cli import LONG_FLAGS, EngineArgs, parse_vllm_argv

VLLM = catalog.VLLM_BINARY
MODEL = catalog.DEFAULT_MODEL.path


def parse(*args: str, read_file=None) -> EngineArgs:
    engine = parse_vllm_argv((VLLM, "serve", *args), read_file)
    assert engine is not None
    return engine


def ok(*args: str, read_file=None) -> EngineArgs:
    engine = parse(*args, read_file=read_file)
    assert engine.exit_status is None, (engine.usage_error, engine.cli_failure)
    return engine


def test_the_unit_the_control_plane_writes() -> None:
    text = catalog.unit_file_text(extra_args=("--enforce-eager",), host="127.0.0.1")
    engine = parse_unit_file(text).engine
    assert engine is not None and engine.exit_status is None
    assert (engine.model_path, engine.served_name, engine.served_names) == (
        MODEL,
        "kimi-k2.5",
        ("kimi-k2.5",),
    )
    assert (engine.tensor_parallel_size, engine.max_model_len, engine.port) == (8, 262144, 8000)
    assert (engine.host, engine.enforce_eager) == ("127.0.0.1", True)
    # vLLM logs them in its parser's registration order, and the model after the frontend's.
    assert [k for k, _v in engine.non_default] == [
        "model_tag",
        "host",
        "model",
        "max_model_len",
        "enforce_eager",
        "served_model_name",
        "tensor_parallel_size",
    ]


def test_other_programs_are_not_engines() -> None:
    assert parse_vllm_argv(("/usr/bin/sleep", "infinity")) is None
    assert parse_vllm_argv((VLLM, "chat")) is None
    assert parse_vllm_argv(()) is None


@pytest.mark.parametrize(
    "args",
    [
        ("--tensor_parallel_size=2",),
        ("--tensor-parallel-size=2",),
        ("--tensor_parallel_size", "2"),
        ("--tensor-parallel=2",),  # a unique prefix
        ("--tensor_parallel", "2"),
        ("-tp", "2"),
        ("-tp=2",),
        ("--tensor-parallel-size", "8", "--tensor-parallel-size=2"),  # the last one wins
    ],
)
def test_spellings_of_one_flag(args: tuple[str, ...]) -> None:
    assert ok(MODEL, *args).tensor_parallel_size == 2


def test_underscores_only_in_the_flag_name() -> None:
    assert ok(MODEL, "--served_model_name=my_model").served_names == ("my_model",)
    assert ok(MODEL, "--served_model_name", "my_model").served_names == ("my_model",)


def test_prefixes_resolve_like_argparse() -> None:
    engine = ok(MODEL, "--served-model=x", "--trust-remote", "--gpu-memory-util=0.5")
    assert (engine.served_name, engine.trust_remote_code) == ("x", True)
    assert engine.gpu_memory_utilization == 0.5
    # An exact flag wins over the longer flags it is a prefix of.
    assert ok(MODEL, "--enable-lora").non_default[-1] == ("enable_lora", True)
    assert ok(MODEL, "--config-format=hf").config_file is None


def test_an_ambiguous_prefix_is_a_usage_error() -> None:
    engine = parse(MODEL, "--max=4096")
    assert engine.exit_status == 2 and engine.usage_prog == "vllm serve"
    assert engine.usage_error is not None
    assert engine.usage_error.startswith(
        "ambiguous option: --max=4096 could match --max-log-len, --max-model-len, "
        "--max-logprobs, --max-parallel-loading-workers, --max-loras, --max-lora-rank, "
    )
    assert parse(MODEL, "--h").usage_error == (
        "ambiguous option: --h could match --help, --headless, --host, "
        "--h11-max-incomplete-event-size, --h11-max-header-count, --hf-config-path, "
        "--hf-token, --hf-overrides"
    )


def test_unknown_flags_and_bad_values_are_usage_errors() -> None:
    engine = parse(MODEL, "--foo", "bar")
    assert (engine.usage_prog, engine.usage_error) == ("vllm", "unrecognized arguments: --foo bar")
    assert parse(MODEL, "--port=x").usage_error == "argument --port: invalid int value: 'x'"
    assert parse(MODEL, "--trust-remote-code=yes").usage_error == (
        "argument --trust-remote-code/--no-trust-remote-code: ignored explicit argument 'yes'"
    )
    # vLLM 0.32 takes any --quantization at parse time (the engine checks it later).
    assert ok(MODEL, "-q", "int3").quantization == "int3"
    assert parse(MODEL, "--dtype", "fp16").usage_error == (
        "argument --dtype: invalid choice: 'fp16' (choose from 'auto', 'bfloat16', 'float', "
        "'float16', 'float32', 'half')"
    )
    # optional_type(int) in vLLM 0.32 goes through parse_type: its message, not argparse's.
    assert parse(MODEL, "--max-log-len=x").usage_error == (
        "argument --max-log-len: Value x cannot be converted to <class 'int'>."
    )
    assert parse(MODEL, "--max-model-len=lots").usage_error == (
        "argument --max-model-len: invalid human_readable_int_or_auto value: 'lots'"
    )
    assert parse(MODEL, "--served-model-name").usage_error == (
        "argument --served-model-name: expected at least one argument"
    )


def test_short_options_and_parallelism() -> None:
    engine = ok(MODEL, "-tp", "2", "-pp", "2", "-dp", "2", "-q", "modelopt_fp4")
    assert (engine.tensor_parallel_size, engine.pipeline_parallel_size) == (2, 2)
    assert (engine.data_parallel_size, engine.quantization) == (2, "modelopt_fp4")
    assert (engine.world_size, engine.gpus_needed) == (4, 8)


def test_served_model_name_takes_several_names() -> None:
    engine = ok(MODEL, "--served-model-name", "kimi", "kimi-k2.5", "--port", "8001")
    assert engine.served_names == ("kimi", "kimi-k2.5") and engine.served_name == "kimi"
    assert engine.port == 8001
    # nargs="+" is greedy: a positional after the names would be one more name, so vLLM 0.32
    # refuses --served-model-name before the positional model.
    before = parse("--served-model-name", "a", MODEL).cli_failure
    assert before is not None and before.exception.startswith(
        "ValueError: `model` should be provided as the first positional argument"
    )


def test_the_model_positional_or_model_flag() -> None:
    assert ok("--model", "/models/x").model_path == "/models/x"
    engine = ok("-tp", "2", "--model=/models/x")
    assert engine.model_path == "/models/x" and "`--model` option" in engine.warnings[0]
    # vLLM 0.11.1+ moves the first --model to the front as the positional: with a positional
    # as well, that one is left over.
    both = parse(MODEL, "--model=/models/other")
    assert (both.usage_prog, both.usage_error) == ("vllm", f"unrecognized arguments: {MODEL}")
    assert parse(MODEL, "--model").cli_failure is not None  # vLLM's own IndexError
    assert ok().model_path == "Qwen/Qwen3-0.6B"  # vLLM's default model


def test_host_port_and_other_frontend_flags() -> None:
    assert ok(MODEL).host is None
    assert ok(MODEL, "--host", "0.0.0.0").host == "0.0.0.0"
    assert ok(MODEL, "--host=").host is None  # optional_type: "" and "None" mean None
    assert ok(MODEL, "--host", "None").host is None
    engine = ok(MODEL, "--uds", "/run/vllm.sock", "--headless")
    assert engine.uds == "/run/vllm.sock" and engine.headless
    assert ok(MODEL, "--api-server-count=0").headless


@pytest.mark.parametrize(
    ("host", "reached"),
    [
        (None, {"127.0.0.1", "localhost", "0.0.0.0"}),
        ("0.0.0.0", {"127.0.0.1", "localhost", "0.0.0.0"}),
        ("::", {"127.0.0.1", "localhost", "0.0.0.0", "::1"}),
        ("127.0.0.1", {"127.0.0.1", "localhost", "0.0.0.0"}),
        ("localhost", {"127.0.0.1", "localhost", "0.0.0.0"}),
        ("::1", {"localhost", "::1"}),
        ("10.1.2.3", {"10.1.2.3"}),
        ("127.0.0.2", {"127.0.0.2"}),
    ],
)
def test_which_addresses_reach_a_bound_server(host: str | None, reached: set[str]) -> None:
    engine = ok(MODEL, *(("--host", host) if host else ()))
    urls = ["127.0.0.1", "localhost", "0.0.0.0", "::1", "10.1.2.3", "127.0.0.2"]
    assert {u for u in urls if engine.serves_http_at(u)} == reached


def test_booleans_and_numbers() -> None:
    assert ok(MODEL).enable_prefix_caching is None
    assert ok(MODEL, "--enable-prefix-caching").enable_prefix_caching is True
    assert ok(MODEL, "--no-enable-prefix-caching").enable_prefix_caching is False
    assert ok(MODEL, "--no-trust-remote-code").trust_remote_code is False
    assert ok(MODEL, "--max-model-len=32k").max_model_len == 32000
    assert ok(MODEL, "--max-model-len=32K").max_model_len == 32768
    assert ok(MODEL, "--max-model-len=auto").max_model_len is None  # -1: what the memory holds
    engine = ok(
        MODEL,
        "--max-num-seqs=64",
        "--max-num-batched-tokens=16k",
        "--kv-cache-dtype=fp8",
        "--dtype=bfloat16",
        "--enable-log-requests",
        "--disable-log-stats",
        "--enable-chunked-prefill",
        "--allowed-local-media-path=/srv/media",
        "--tokenizer=/models/tok",
        "--revision=main",
        "--load-format=dummy",
        "--enable-expert-parallel",
    )
    assert (engine.max_num_seqs, engine.max_num_batched_tokens) == (64, 16000)
    assert (engine.kv_cache_dtype, engine.dtype, engine.load_format) == ("fp8", "bfloat16", "dummy")
    assert engine.tokenizer == "/models/tok"
    # Flags vLLM 0.11 had and 0.32 does not.
    assert parse(MODEL, "--swap-space=8", "--disable-log-requests").usage_error == (
        "unrecognized arguments: --swap-space=8 --disable-log-requests"
    )
    assert parse(MODEL, "--task", "embed").usage_error == (
        "unrecognized arguments: --task embed\n\nHint: --task is not a vllm serve option. For "
        "embedding, reranking, or reward models, use --runner pooling. To adapt a generative "
        "model for pooling, also use --convert embed, --convert classify, or --convert reward."
    )


def test_the_api_key_is_never_kept() -> None:
    engine = ok(MODEL, "--api-key", "sekret", "--hf-token=xyz123")
    assert engine.api_key_set and len(engine.api_key_sha256) == 1
    assert "sekret" not in repr(engine) and "xyz123" not in repr(engine)
    assert ("api_key", ["<redacted>"]) in engine.non_default
    assert not ok(MODEL).api_key_set


def test_help_exits_before_anything_else() -> None:
    engine = parse(MODEL, "--help", "--foo")
    assert engine.help_requested and engine.exit_status == 0
    assert parse(MODEL, "--help=ModelConfig").help_requested
    assert parse(MODEL, "--hel").help_requested


def test_dotted_arguments_fold_into_json() -> None:
    engine = ok(MODEL, "-cc.mode", "3", "-cc.max_cudagraph_capture_size=1k")
    assert ("compilation_config", {"mode": 3, "max_cudagraph_capture_size": 1000}) in (
        engine.non_default
    )
    # One JSON argument per spelling: the long one's and the short one's, the last one wins.
    assert ("compilation_config", {"mode": 2}) in ok(
        MODEL, "-cc.mode=3", "--compilation-config.mode=2"
    ).non_default
    assert parse(MODEL, "--compilation-config.mode").cli_failure is not None
    # -O3 is the optimization level in vLLM 0.32 (it was -O.level, the compilation level).
    assert ("optimization_level", "3") in ok(MODEL, "-O3").non_default
    assert ("optimization_level", "1") in ok(MODEL, "-O", "1").non_default


def test_config_files_are_read_when_the_process_starts() -> None:
    files = {
        "/etc/vllm/serve.yaml": "port: 8001\ntensor-parallel-size: 2\ntrust-remote-code: true\n"
    }
    args = (MODEL, "--config", "/etc/vllm/serve.yaml", "--port", "8002")
    at_load = ok(*args)  # how systemd loads the unit: nothing is read yet
    assert at_load.config_file == "/etc/vllm/serve.yaml" and at_load.port == 8002
    started = ok(*args, read_file=files.get)
    # The file's flags go in after the model, so the command line still wins over them.
    assert (started.port, started.tensor_parallel_size, started.trust_remote_code) == (
        8002,
        2,
        True,
    )

    missing = parse(MODEL, "--config", "/etc/vllm/none.yaml", read_file=files.get)
    assert missing.cli_failure is not None and missing.exit_status == 1
    assert missing.cli_failure.exception == (
        "FileNotFoundError: [Errno 2] No such file or directory: '/etc/vllm/none.yaml'"
    )
    wrong = parse(MODEL, "--config", "/etc/vllm/serve.json", read_file=files.get).cli_failure
    assert wrong is not None and "must be of a yaml/yml type. json supplied" in wrong.exception
    assert parse(MODEL, "--config").cli_failure is not None
    # Only the two-word spelling is looked for: `--config=PATH` is stored by argparse, unread.
    assert ok(MODEL, "--config=/etc/vllm/none.yaml", read_file=files.get).port == 8000


def test_validation_before_the_server_starts() -> None:
    files = {"/etc/vllm/chat.jinja": "{{ messages }}"}
    assert ok(MODEL, "--chat-template=/etc/vllm/chat.jinja", read_file=files.get)
    failure = parse(MODEL, "--chat-template=/etc/vllm/nope.jinja", read_file=files.get)
    assert failure.cli_failure is not None
    assert failure.cli_failure.exception == (
        "ValueError: The supplied chat template string (/etc/vllm/nope.jinja) appears "
        "path-like, but doesn't exist!"
    )
    tools = parse(MODEL, "--enable-auto-tool-choice").cli_failure
    assert tools is not None and tools.exception.endswith("requires --tool-call-parser")
    assert ok(MODEL, "--enable-auto-tool-choice", "--tool-call-parser=kimi_k2")


_WORDS = st.one_of(
    st.sampled_from(LONG_FLAGS),
    st.sampled_from(["-tp", "-pp", "-dp", "-q", "-O", "-O3", "--", "-", "--help", "--config"]),
    st.builds(
        lambda flag, value: f"{flag}={value}",
        st.sampled_from(LONG_FLAGS),
        st.text(max_size=12),
    ),
    st.builds(lambda flag: flag.replace("-", "_"), st.sampled_from(LONG_FLAGS)),
    st.builds(lambda flag, n: flag[: max(3, n)], st.sampled_from(LONG_FLAGS), st.integers(3, 30)),
    st.sampled_from(["8", "0", "-1", "0.5", "None", "", "fp8", MODEL, "/models/x.yaml", "a.b"]),
    st.text(max_size=16),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_WORDS, max_size=12))
def test_any_command_line_gives_engine_args(words: list[str]) -> None:
    files = {"/models/x.yaml": "port: 9000\n", "/etc/c.yaml": "- not a mapping\n"}
    for read_file in (None, files.get):
        engine = parse(*words, read_file=read_file)
        assert isinstance(engine, EngineArgs)
        assert engine.exit_status in (None, 0, 1, 2)
        if engine.usage_error is not None:
            assert isinstance(engine.usage_error, str) and engine.usage_prog in (
                "vllm",
                "vllm serve",
            )
        if engine.exit_status is None:
            assert isinstance(engine.model_path, str) and engine.served_names
    # The same words as the unit file line systemd splits.
    text = catalog.unit_file_text().replace(
        "--port 8000", "--port 8000 " + " ".join(shlex.quote(w) for w in words if "\n" not in w)
    )
    assert parse_unit_file(text) is not None
