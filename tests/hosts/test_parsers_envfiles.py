"""Environment files read as systemd reads them, and their secrets never kept."""

from __future__ import annotations

import string
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from hosts.parsers import (
    REDACTED,
    is_secret_key,
    parse_environment_file,
    redact_environment_text,
)

SAMPLES = Path(__file__).parent / "samples"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def test_a_hand_written_env_file_reads_as_systemd_reads_it() -> None:
    variables, problems = parse_environment_file(sample("envfile_kimi.env"))

    assert problems == []
    assert variables == {
        "MODEL": "nvidia/Kimi-K2.5-NVFP4",
        "SERVED_MODEL_NAME": "kimi-k2.5",  # spaces around `=` are trimmed
        "HF_TOKEN": REDACTED,
        "VLLM_API_KEY": REDACTED,
        "NCCL_DEBUG": "WARN",  # trailing whitespace of an unquoted value is trimmed
        "EXTRA_ARGS": "--enable-prefix-caching --max-num-seqs 64",  # \\-newline in quotes
    }


def test_the_raw_text_keeps_what_is_not_secret_and_nothing_that_is() -> None:
    redacted = redact_environment_text(sample("envfile_kimi.env"))

    assert redacted.splitlines() == [
        "# vLLM Kimi-K2.5 on gpu-prod-01 (managed by hand, see runbook)",
        "MODEL=nvidia/Kimi-K2.5-NVFP4",
        "SERVED_MODEL_NAME = kimi-k2.5",
        "HF_TOKEN=<redacted>",
        "VLLM_API_KEY=<redacted>",
        "NCCL_DEBUG=WARN   ",
        'EXTRA_ARGS="--enable-prefix-caching \\',
        '--max-num-seqs 64"',
        "; <redacted>",  # a commented-out old token
    ]


def test_lines_systemd_would_not_read_are_problems_that_quote_no_value() -> None:
    text = sample("envfile_bad_lines.env")

    variables, problems = parse_environment_file(text)

    assert variables == {"MODEL": "nvidia/Kimi-K2.5-NVFP4", "AUTH_HEADER": REDACTED}
    assert problems == [
        "line 1: `export HF_TOKEN=` (systemd ignores the line)",
        "line 3: not KEY=VALUE (systemd ignores it)",
        "line 4: '9LIVES' is not a variable name",
        "line 5: the quote of AUTH_HEADER is never closed",
    ]
    redacted = redact_environment_text(text)
    for secret in ("hf_exportedSecret", "hf_straySecret", "unterminated-6666"):
        assert secret in text and secret not in redacted and secret not in repr(problems)


def test_keys_that_look_secret() -> None:
    secret = ["HF_TOKEN", "VLLM_API_KEY", "aws_secret_access_key", "DB_PASSWORD", "PASSPHRASE"]
    secret += ["GOOGLE_APPLICATION_CREDENTIALS", "AUTH", "Proxy-Authorization"]
    plain = ["MODEL", "SERVED_MODEL_NAME", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG", "PORT"]

    assert all(is_secret_key(k) for k in secret)
    assert not any(is_secret_key(k) for k in plain)


def test_empty_and_comment_only_files() -> None:
    assert parse_environment_file("") == ({}, [])
    assert parse_environment_file("# nothing\n;\n\n") == ({}, [])
    assert redact_environment_text("") == ""


def test_cats_own_error_is_kept_in_the_raw_text() -> None:
    line = "cat: /etc/vllm/kimi-k25.env: Permission denied\n"

    assert redact_environment_text(line) == line


_value_chars = string.ascii_letters + string.digits + "-_./+=:@ '\"\\#;$\t"
_secret_keys = st.sampled_from(["HF_TOKEN", "API_KEY", "DB_PASSWORD", "X_SECRET", "AUTH"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "export ", "  ", "# ", "; "]),
            _secret_keys,
            st.sampled_from(["=", " = ", "="]),
            st.sampled_from(["", '"', "'"]),
            st.text(_value_chars, min_size=6, max_size=30),
            st.sampled_from(["\n", "\\\n", "\r\n", ""]),
        ),
        min_size=1,
        max_size=5,
    ),
    st.text(string.ascii_letters + "=\n #", max_size=40),
)
def test_no_secret_value_survives_redaction(lines: list[tuple[str, ...]], noise: str) -> None:
    """Whatever the quoting, continuation or comment around it, a secret-looking key's value
    (made of characters no plain line here has) is gone from the stored text."""
    text = noise + "\n"
    secrets = []
    for prefix, key, eq, quote, value, end in lines:
        marker = f"SECRET{len(secrets)}x{value}"
        secrets.append(marker)
        text += f"{prefix}{key}{eq}{quote}{marker}{quote}{end}"

    redacted = redact_environment_text(text)
    variables, problems = parse_environment_file(text)

    for marker in secrets:
        distinctive = marker[: len(f"SECRET{secrets.index(marker)}x") + 6]
        assert distinctive not in redacted
        assert distinctive not in repr(variables) and distinctive not in repr(problems)
