"""controlplane.redaction against a corpus: lines holding secrets lose exactly the secret, and
the ordinary settings engineers read (vLLM's args, throughput lines, ExecStart=) stay byte for
byte. The end-to-end paths (journal view, snapshot API, pages) are in test_redaction_paths.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controlplane.redaction import (
    REDACTED,
    is_secret_name,
    looks_secret,
    redact_data,
    redact_text,
)
from hosts.parsers import parse_journal, redact_unit_text

J = "2026-01-12T09:14:03+00:00 gpu-01 vllm[4242]: "  # a journal line's prefix (short-iso)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0"
    ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
GOOGLE_KEY = "AIzaSyD" + "1234567890" + "abcdefghijklmnopqrstuv"  # AIza and 35 characters
HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"

# (line, the secrets in it): each secret must be gone, the rest of the line kept.
SECRET_LINES = [
    (
        J + "curl -H 'Authorization: Bearer sk-proj-AbCdEf0123456789GhIjKl' http://127.0.0.1:8000",
        ["sk-proj-AbCdEf0123456789GhIjKl"],
    ),
    ("Authorization: Basic dXNlcjpodW50ZXIy", ["dXNlcjpodW50ZXIy"]),
    (J + "proxy: Bearer abc.def-ghi_jkl", ["abc.def-ghi_jkl"]),
    (
        J + "Downloading https://mirror:Hunter2Mirror@hf-mirror.example.com/models/kimi ...",
        ["Hunter2Mirror"],
    ),
    ("password: hunter2", ["hunter2"]),
    (J + "db password=hunter3 accepted", ["hunter3"]),
    (J + f"token {HF} has no access to moonshotai/Kimi-K2.5", [HF]),
    (
        J + "OpenAI fallback key sk-live-0123456789abcdefABCDEF rejected",
        ["sk-live-0123456789abcdef"],
    ),
    ("aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE", ["AKIAIOSFODNN7EXAMPLE"]),
    (
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
    ),
    (
        '{"type": "service_account", "project_id": "infra", "private_key_id": '
        '"1f2e3d4c5b6a79880123456789abcdef01234567", "private_key": "-----BEGIN PRIVATE KEY-----'
        '\\nMIIEvgIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n", '
        '"client_email": "probe@infra.iam.gserviceaccount.com"}',
        ["1f2e3d4c5b6a79880123456789abcdef01234567", "MIIEvgIBADANBgkqhkiG9w0BAQEFAASC"],
    ),
    (
        J + f"GET https://generativelanguage.googleapis.com/v1/models?alt=json {GOOGLE_KEY}",
        [GOOGLE_KEY],
    ),
    (J + f"session {JWT} expired", [JWT, "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"]),
    (J + f"git clone https://x:{GITHUB}@github.com/org/patches", [GITHUB]),
    ("ExecStart=/opt/vllm/bin/vllm serve /models/kimi --api-key sk-x --port 8000", ["sk-x"]),
    ("ExecStart=/opt/vllm/bin/vllm serve /models/kimi --api-key=sk-x --port 8000", ["sk-x"]),
    ('ExecStart=/opt/vllm/bin/vllm serve /models/kimi --api-key "sk x y"', ["sk x y"]),
    ("ExecStart=/opt/vllm/bin/vllm serve /models/kimi --hf-token hf_x --port 8000", ["hf_x"]),
    ("ExecStart=/opt/sglang/bin/python -m sglang.launch_server --admin-api-key=adm1n", ["adm1n"]),
    (J + "non-default args: {'model': '/models/kimi', 'api_key': 'sk-x', 'port': 8000}", ["sk-x"]),
    (J + "non-default args: {'api_key': ['sk-a', 'sk-b'], 'hf_token': 'hf_y'}", ["sk-a", "hf_y"]),
    (
        "ExecStart=/opt/vllm/bin/vllm serve /models/kimi --foo db_password=Hunter2Db --port 8000",
        ["Hunter2Db"],
    ),
    (J + "X-Api-Key: k3y-v4lue sent", ["k3y-v4lue"]),
    ("HUGGING_FACE_HUB_TOKEN=hf_short", ["hf_short"]),
    ("export OPENAI_API_KEY='sk-quoted-key'", ["sk-quoted-key"]),
    ("ACCESS_TOKEN=tok1, REFRESH_TOKEN=tok2, model=kimi", ["tok1", "tok2"]),
    ("?auth_token=abc&model=kimi", ["abc"]),
    ("credentials: {user: probe}", []),  # a value that opens a structure is left to its keys
]


@pytest.mark.parametrize(("line", "secrets"), SECRET_LINES, ids=[s[0][:60] for s in SECRET_LINES])
def test_a_secret_in_a_line_is_gone(line: str, secrets: list[str]) -> None:
    shown = redact_text(line)

    for secret in secrets:
        assert secret in line and secret not in shown, shown
    if secrets:
        assert REDACTED in shown
    assert redact_text(shown) == shown  # shown again (a stored snapshot on a page): unchanged


def test_only_the_value_goes_names_and_separators_stay() -> None:
    line = (
        "non-default args: {'model': '/models/kimi', 'api_key': 'sk-x', "
        "'max_num_batched_tokens': 8192, 'hf_token': 'hf_y'}"
    )
    assert redact_text(line) == (
        "non-default args: {'model': '/models/kimi', 'api_key': '<redacted>', "
        "'max_num_batched_tokens': 8192, 'hf_token': '<redacted>'}"
    )
    assert redact_text("a=1, api_key=sk-x, b=2") == "a=1, api_key=<redacted>, b=2"
    assert redact_text("https://user:pw@host/x") == "https://user:<redacted>@host/x"
    assert (
        redact_text("--foo db_password=s3cr3t --port 1") == "--foo db_password=<redacted> --port 1"
    )


# The ordinary settings and figures engineers read: byte for byte.
PLAIN_LINES = [
    J + "(APIServer pid=4242) INFO 01-12 09:14:03 [utils.py:253] non-default args: "
    "{'model_tag': '/models/Kimi-K2.5-NVFP4', 'host': '0.0.0.0', 'port': 8000, "
    "'model': '/models/Kimi-K2.5-NVFP4', 'tokenizer': '/models/Kimi-K2.5-NVFP4', "
    "'tokenizer_mode': 'auto', 'trust_remote_code': True, 'max_model_len': 262144, "
    "'served_model_name': ['kimi-k2.5'], 'tensor_parallel_size': 8, "
    "'max_num_batched_tokens': 8192, 'max_num_seqs': 64, 'kv_cache_dtype': 'fp8', "
    "'enable_prefix_caching': True, 'num_gpu_blocks_override': None, "
    "'disable_log_requests': True, 'api_key': None}",
    J + "(APIServer pid=4242) INFO 01-12 09:20:13 [loggers.py:123] Engine 000: "
    "Avg prompt throughput: 1523.4 tokens/s, Avg generation throughput: 82.1 tokens/s, "
    "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.2%, Prefix cache hit rate: 41.7%",
    "ExecStart=/opt/vllm/.venv/bin/vllm serve /models/Kimi-K2.5-NVFP4 --tensor-parallel-size 8 "
    "--max-num-batched-tokens 8192 --max-model-len 262144 --tokenizer-mode auto "
    "--kv-cache-dtype fp8 --max-tokens 16 --port 8000",
    "max_num_batched_tokens=8192, tokenizer=/models/kimi, tokenizer_mode=auto, max_tokens=16, "
    "kv_cache_dtype=fp8, num_gpu_blocks_override=None, disable_log_requests=True",
    "Environment=TOKENIZERS_PARALLELISM=false VLLM_USE_V1=1",
    "tokenizer_config: {'bos_token': '<s>', 'eos_token': '</s>', 'pad_token': '<unk>'}",
    "3f0c2a9d1b8e7f6a5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b  "
    "/etc/systemd/system/vllm-kimi-k25.service",
    "Server host key: ssh-ed25519 SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s",
    'vllm:prompt_tokens_total{engine="0",model_name="kimi-k2.5"} 1.234e+06',
    "0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 97199 MiB, 97887 MiB, 83.85 W, 0 %",
    "PWD=/root HOME=/root USER=root",
    "ssl_keyfile=/etc/vllm/tls/key.pem ssl_certfile=/etc/vllm/tls/cert.pem",
    "",
]


@pytest.mark.parametrize("line", PLAIN_LINES, ids=[s[:60] for s in PLAIN_LINES])
def test_ordinary_settings_stay_readable(line: str) -> None:
    assert redact_text(line) == line


def test_line_structure_is_kept() -> None:
    text = "\n".join([*PLAIN_LINES, *(line for line, _ in SECRET_LINES), ""])
    shown = redact_text(text)
    assert shown.count("\n") == text.count("\n")
    assert shown.split("\n")[: len(PLAIN_LINES)] == PLAIN_LINES


def test_a_private_key_block_loses_its_body_and_keeps_its_markers() -> None:
    body = [
        "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw",
        "7ZUpqdVp8TlRAo7q/5CSurVDnS5vvLPKxBwyrKUMHnUBtBFtVxPSwcaI8E/yCZV3hFFT",
        "yq3/5hfdrQ==",
    ]
    text = "\n".join(
        [
            J + "loaded key:",
            J + "-----BEGIN RSA PRIVATE KEY-----",
            *(J + line for line in body),
            J + "-----END RSA PRIVATE KEY-----",
            J + "Application startup complete.",
        ]
    )
    shown = redact_text(text).split("\n")

    assert len(shown) == 7
    assert shown[1] == J + "-----BEGIN RSA PRIVATE KEY-----"
    assert shown[2:5] == [J + REDACTED] * 3
    assert shown[5:] == [J + "-----END RSA PRIVATE KEY-----", J + "Application startup complete."]
    openssh = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" not in redact_text(openssh)


@pytest.mark.parametrize(
    "name",
    ["api_key", "API_KEY", "--api-key", "apiKey", "hf_token", "--hf-token", "HF_TOKEN",
     "HUGGING_FACE_HUB_TOKEN", "password", "DB_PASSWORD", "dbpassword", "passwd", "secret",
     "client_secret", "access_token", "auth_token", "credentials", "AUTH_HEADER",
     "Authorization", "Proxy-Authorization", "X-Api-Key", "FIELD_ENCRYPTION_KEY",
     "private_key_id", "aws_secret_access_key", "PASSPHRASE", "admin_api_key", "db_pass"],
)  # fmt: skip
def test_secret_looking_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["max_num_batched_tokens", "tokenizer", "tokenizer_mode", "max_tokens", "tokens",
     "num_gpu_blocks_override", "kv_cache_dtype", "key_cache_dtype", "disable_log_requests",
     "TOKENIZERS_PARALLELISM", "--max-num-batched-tokens", "--tokenizer-mode", "model",
     "served_model_name", "eos_token", "public_key", "host_key", "ssl_keyfile", "PWD",
     "keyboard", "monkey", "auth_type", "hf_token_path", "ssl_key_file", "DB_PASSWORD_FILE"],
)  # fmt: skip
def test_ordinary_names(name: str) -> None:
    assert not is_secret_name(name)


def test_looks_secret_for_words_someone_typed() -> None:
    for word in ("sk-x", "sk-proj-abc123", HF, "--api-key=sk-x", "api_key=abc", JWT, GITHUB):
        assert looks_secret(word), word
    for word in ("--max-num-batched-tokens", "8192", "moonshotai/Kimi-K2.5", "--api-key",
                 "hf_overrides", "--tokenizer=auto", "fp8"):  # fmt: skip
        assert not looks_secret(word), word


def test_data_has_every_string_and_secret_key_redacted() -> None:
    data = {
        "deployments": {"u": {"journal": ["x", "--api-key sk-x"], "variables": {"HF_TOKEN": "hf"}}},
        "max_num_batched_tokens": 8192,
    }
    assert redact_data(data) == {
        "deployments": {
            "u": {"journal": ["x", f"--api-key {REDACTED}"], "variables": {"HF_TOKEN": REDACTED}}
        },
        "max_num_batched_tokens": 8192,
    }
    assert data["deployments"]["u"]["journal"][1] == "--api-key sk-x"  # the argument is kept


def test_the_journal_and_unit_parsers_use_it() -> None:
    line = J + "GET https://user:Hunter2Url@mirror/x max_num_batched_tokens=8192, tokenizer=t"
    (kept,) = parse_journal(line + "\n", lines=10, max_bytes=4096)
    assert (
        kept == J + "GET https://user:<redacted>@mirror/x max_num_batched_tokens=8192, tokenizer=t"
    )

    unit = "[Service]\nExecStart=/v serve m --foo db_password=Hunter2Db --max-num-seqs 64\n"
    assert redact_unit_text(unit) == (
        "[Service]\nExecStart=/v serve m --foo db_password=<redacted> --max-num-seqs 64\n"
    )


def test_logs_pass_through_it() -> None:
    import io
    import logging

    from controlplane.redaction import RedactingFilter

    # settings.LOGGING puts the filter on the handler everything propagates to.
    root_filters = [f for h in logging.getLogger().handlers for f in h.filters]
    assert any(isinstance(f, RedactingFilter) for f in root_filters)

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("tests.redaction")
    logger.addHandler(handler)
    try:
        logger.warning("probe of %s: %s", "gpu-01", "curl -H 'Authorization: Bearer sk-x1'")
        try:
            raise ValueError("bad unit line: --api-key sk-x2 --max-num-seqs 64")
        except ValueError:
            logger.exception("parse failed")
    finally:
        logger.removeHandler(handler)
    written = stream.getvalue()
    assert "sk-x1" not in written and "sk-x2" not in written
    assert "probe of gpu-01: curl -H 'Authorization: Bearer <redacted>'" in written
    assert "--api-key <redacted> --max-num-seqs 64" in written


# --- the keyword patterns' shortcut ----------------------------------------------------------


# Lines shaped like what the keyword detectors look for (a name, a key word in any case, a
# separator, a value of one detector's length and alphabet), among words that are not.
@st.composite
def keyword_lines(draw: st.DrawFn) -> str:
    def one_of(*choices: str) -> str:
        return draw(st.sampled_from(choices))

    name = one_of("", "cloudant", "cl", "clou", "ibm_cloud_iam", "cloud", "ibm-cos-hmac",
                  "cos_", "softlayer", "sl", "aws_", "my_aws_", "model", "perm")  # fmt: skip
    word = one_of("key", "KEY", "Pwd", "pw", "password", "PASS", "token", "Token",
                  "secret_access_key", "secret-key", "\u212aey", "id", "")  # fmt: skip
    value = one_of("a" * 24, "0f" * 32, "a1" * 32, "ab" * 24, "Aa0_" * 11, "x9/+" * 10, "")
    line = (
        one_of("", "[", '"', "'") + name + one_of("", "_", "-") + one_of("", "api", "api_")
        + word + one_of("", '"', "'", "]") + one_of(" = ", ":", " ", "  ", "::", "=>", "")
        + one_of("", '"', "'") + value + one_of("", '"', "'")
    )  # fmt: skip
    return one_of("", "x ", '{"id": "m", ') + line + one_of("", " end", "\n")


def test_only_patterns_that_need_a_key_word_are_skipped_without_one() -> None:
    from controlplane import redaction

    assert redaction._KEYWORD_PATTERNS  # the shortcut is in use
    for pattern in redaction._KEYWORD_PATTERNS:
        assert any(group in pattern.pattern for group in redaction._KEYWORD_GROUPS)
    kept = [p for p in redaction._TOKEN_PATTERNS if p not in redaction._KEYWORD_PATTERNS]
    assert any("AKIA" in p.pattern for p in kept)  # shape-only detectors always run


@settings(max_examples=600, deadline=None)
@given(st.lists(keyword_lines(), min_size=1, max_size=3))
def test_skipping_the_keyword_patterns_changes_no_redaction(lines: list[str]) -> None:
    from controlplane import redaction

    text = "".join(lines)
    shortcut = redaction.redact_text(text)
    every = redaction._KEYWORD_PATTERNS
    try:
        redaction._KEYWORD_PATTERNS = frozenset()
        assert redaction.redact_text(text) == shortcut
    finally:
        redaction._KEYWORD_PATTERNS = every


def test_a_keyword_secret_is_still_redacted() -> None:
    line = "CLOUDANT_PASSWORD=" + "q" * 24
    assert "q" * 24 not in redact_text(line)
    assert "f0" * 32 not in redact_text('"softlayer_api_key": "' + "f0" * 32 + '"')
