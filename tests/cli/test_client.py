"""The client's own care, in-process (no request leaves): links followed on CPCTL_URL only,
and environment lines that may hold secrets never repeated."""

from __future__ import annotations

import io

import click
import pytest

from controlplane.cli.client import Client
from controlplane.cli.config import Config
from controlplane.cli.targets import read_environment


def client_for(url: str) -> Client:
    return Client(Config(url=url, token="cpt_x", url_from="test", token_from="test"))


API = "/api/v1"


@pytest.mark.parametrize(
    ("base", "link", "path"),
    [
        (
            "https://cp.example.com",
            f"https://evil.example{API}/changes/?c=a",
            f"{API}/changes/?c=a",
        ),
        ("https://cp.example.com", f"http://cp.example.com{API}/hosts/?c=b", f"{API}/hosts/?c=b"),
        ("https://example.com/cp", f"https://example.com/cp{API}/hosts/", f"{API}/hosts/"),
    ],
)
def test_a_next_link_is_followed_on_the_configured_server_only(base, link, path):
    client = client_for(base)
    followed = client._same_server(link)
    assert followed == path
    assert client._url(followed).startswith(f"{base}/api/v1/")


def test_environment_lines_are_named_by_number_never_by_content():
    lines = io.StringIO("# tokens for the model hub\nHF_TOKEN=hf_secret\n\nHF_HUB_OFFLINE=1\n")
    lines.name = "prod.env"
    env = read_environment(("VLLM_LOGGING_LEVEL=INFO",), lines)
    assert env == {"VLLM_LOGGING_LEVEL": "INFO", "HF_TOKEN": "hf_secret", "HF_HUB_OFFLINE": "1"}
    bad = io.StringIO("hf_secret_without_a_name\n")
    bad.name = "prod.env"
    with pytest.raises(click.UsageError) as refused:
        read_environment((), bad)
    assert "prod.env line 1" in refused.value.message
    assert "hf_secret" not in refused.value.message
    assert read_environment((), None) is None  # neither: the server keeps the unit's
