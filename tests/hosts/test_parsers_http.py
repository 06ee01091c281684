"""curl's responses, /v1/models and /metrics (hosts/parsers/http.py)."""

from __future__ import annotations

import pytest

from hosts.parsers import (
    HttpResult,
    ParseError,
    parse_http,
    parse_models_json,
    parse_vllm_metrics,
)
from tests.hosts.parser_samples import (
    CURL_REFUSED,
    http,
    sample,
)

MODELS_SGLANG = (
    '{"object":"list","data":[{"id":"qwen3-235b","object":"model","created":1762247564,'
    '"owned_by":"sglang","root":"Qwen/Qwen3-235B-A22B-Instruct-2507","max_model_len":131072}]}'
)


@pytest.mark.parametrize("body", ["", '{"a": 1}', "line\n", "two\nlines\n\n"])
def test_http_body_comes_back_byte_exact(body: str) -> None:
    assert parse_http(http(body, 200)) == HttpResult(body, 200, None)


def test_http_000_carries_the_curl_error() -> None:
    result = parse_http(http(CURL_REFUSED, 0))

    assert result == HttpResult("", None, CURL_REFUSED.strip())


def test_http_non_200() -> None:
    body = '{"error": "Service Unavailable"}'
    assert parse_http(http(body, 503)) == HttpResult(body, 503, None)


def test_http_without_trailer_is_truncated() -> None:
    assert parse_http('{"object":"list","da') == HttpResult(
        '{"object":"list","da', None, "truncated"
    )


def test_http_partial_body_after_a_timeout_keeps_the_error() -> None:
    """curl's stderr is unbuffered, so its error comes before the buffered body (real order)."""
    error = (
        "curl: (28) Operation timed out after 5001 milliseconds with 14 out of 100 bytes received"
    )
    text = f'{error}\n{{"partial": tr\n@@cp:http:200\n'

    assert parse_http(text) == HttpResult('{"partial": tr', 200, error)


def test_http_error_after_the_body_is_found_too() -> None:
    error = "curl: (56) Recv failure: Connection reset by peer"

    assert parse_http(f"# HELP x\n{error}\n\n@@cp:http:200\n").error == error


def test_http_000_without_a_curl_message() -> None:
    assert parse_http(http("", 0)) == HttpResult("", None, "no HTTP response")


# --- /v1/models, /metrics ------------------------------------------------------------------


def test_models_json_vllm() -> None:
    assert parse_models_json(sample("vllm_models.json")) == (
        ["kimi-k2.5"],
        ["/models/moonshotai/Kimi-K2.5"],
        262144,
    )


def test_models_json_sglang_and_missing_fields() -> None:
    assert parse_models_json(MODELS_SGLANG) == (
        ["qwen3-235b"],
        ["Qwen/Qwen3-235B-A22B-Instruct-2507"],
        131072,
    )
    bare = '{"object":"list","data":[{"id":"default","object":"model","owned_by":"sglang"}]}'
    assert parse_models_json(bare) == (["default"], [], None)
    assert parse_models_json('{"object":"list","data":[]}') == ([], [], None)


def test_models_json_base_model_and_lora_adapter() -> None:
    body = (
        '{"object":"list","data":['
        '{"id":"kimi-k2.5","root":"/models/Kimi-K2.5","parent":null,"max_model_len":262144},'
        '{"id":"kimi-sql","root":"/adapters/sql","parent":"kimi-k2.5","max_model_len":null}]}'
    )

    assert parse_models_json(body) == (
        ["kimi-k2.5", "kimi-sql"],
        ["/models/Kimi-K2.5", "/adapters/sql"],
        262144,
    )


@pytest.mark.parametrize(
    "body",
    [
        "",
        "<html><body><h1>502 Bad Gateway</h1></body></html>",
        '{"object":"list","data":[{"id":"kimi',
        "[]",
        '{"object":"list"}',
        '{"data": {"id": "x"}}',
        '{"data": ["x"]}',
        '{"data": [{"id": 7}]}',
        '{"data": [{"id": "x", "max_model_len": "262144"}]}',
        '{"data": [{"id": "x", "max_model_len": true}]}',
        '{"data": [{"id": "x", "root": ["a"]}]}',
        "[" * 100_000,
    ],
)
def test_models_json_garbage_raises(body: str) -> None:
    with pytest.raises(ParseError):
        parse_models_json(body)


def test_vllm_metrics_sum_requests_over_engines_and_average_kv_cache() -> None:
    running, waiting, kv_cache = parse_vllm_metrics(sample("vllm_metrics_dp2.txt"))

    assert (running, waiting) == (5.0, 1.0)
    assert kv_cache == pytest.approx(0.35)


def test_vllm_metrics_agree_with_prometheus_client() -> None:
    parser = pytest.importorskip("prometheus_client.parser")
    values: dict[str, list[float]] = {}
    for family in parser.text_string_to_metric_families(sample("vllm_metrics_dp2.txt")):
        for s in family.samples:
            values.setdefault(s.name, []).append(s.value)

    running, waiting, kv_cache = parse_vllm_metrics(sample("vllm_metrics_dp2.txt"))

    assert running == sum(values["vllm:num_requests_running"])
    assert waiting == sum(values["vllm:num_requests_waiting"])
    kv = values["vllm:kv_cache_usage_perc"]
    assert kv_cache == pytest.approx(sum(kv) / len(kv))


def test_vllm_metrics_older_names_and_label_sets_of_several_models() -> None:
    text = """\
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="Qwen/Qwen2.5-Coder-32B-Instruct"} 4.0
vllm:num_requests_running{model_name="qwen-coder-lora"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="Qwen/Qwen2.5-Coder-32B-Instruct"} 7.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="Qwen/Qwen2.5-Coder-32B-Instruct"} 0.9
"""
    assert parse_vllm_metrics(text) == (5.0, 7.0, 0.9)


def test_vllm_metrics_prefers_the_newer_kv_cache_name() -> None:
    text = "vllm:gpu_cache_usage_perc 0.9\nvllm:kv_cache_usage_perc 0.5\n"

    assert parse_vllm_metrics(text)[2] == 0.5


def test_vllm_metrics_sglang_names() -> None:
    text = sample("sglang_metrics_dp2.txt")
    assert parse_vllm_metrics(text) == (22.0, 3.0, 0.375)


def test_vllm_metrics_skip_nan_and_inf() -> None:
    text = (
        'vllm:num_requests_running{engine="0"} NaN\n'
        'vllm:num_requests_running{engine="1"} 2.0\n'
        'vllm:num_requests_waiting{engine="0"} +Inf\n'
        'vllm:kv_cache_usage_perc{engine="0"} -Inf\n'
    )

    assert parse_vllm_metrics(text) == (2.0, None, None)


def test_vllm_metrics_missing_is_none() -> None:
    assert parse_vllm_metrics("") == (None, None, None)
    assert parse_vllm_metrics("# HELP vllm:num_requests_running x\n") == (None, None, None)
    assert parse_vllm_metrics("<html>404 Not Found</html>\n") == (None, None, None)


def test_vllm_metrics_labels_with_spaces_braces_quotes_and_a_timestamp() -> None:
    text = (
        'vllm:num_requests_running{model_name="my model {v2} \\"best\\""} 3 1762247564000\n'
        "vllm:num_requests_running  4.0\n"
    )

    assert parse_vllm_metrics(text)[0] == 7.0


@pytest.mark.parametrize(
    "line",
    [
        'vllm:num_requests_running{engine="0",model_name="kimi-k2.5"}',
        'vllm:num_requests_running{engine="0",model_na',
        'vllm:num_requests_waiting{engine="0"} three',
    ],
)
def test_vllm_metrics_malformed_line_of_a_used_metric_raises(line: str) -> None:
    with pytest.raises(ParseError, match="malformed metric line"):
        parse_vllm_metrics(f"vllm:num_requests_running 1.0\n{line}\n")


def test_vllm_metrics_malformed_line_of_another_metric_is_skipped() -> None:
    text = 'vllm:num_requests_running 1.0\nweird line { without value\nfoo_bar{a="b\n'

    assert parse_vllm_metrics(text) == (1.0, None, None)
