"""AUDIT_STREAMS, as settings read it: what parses, and a clear refusal for what cannot work."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from controlplane.settings_parts.audit_streams import audit_streams


def _parse(*destinations: Any) -> Any:
    return audit_streams(json.dumps(list(destinations)))


def test_unset_or_empty_streams_nothing() -> None:
    assert audit_streams("") == ()
    assert audit_streams("  ") == ()
    assert audit_streams("[]") == ()


def test_each_kind_parses_with_its_defaults() -> None:
    siem, archive, lake = _parse(
        {"name": "siem", "kind": "syslog", "host": "siem.example.net"},
        {"name": "archive", "kind": "file", "path": "/var/log/cp/audit.jsonl"},
        {
            "name": "lake",
            "kind": "http",
            "url": "https://collector.example.net/in/TOKEN123?k=v",
            "authorization_file": "/run/secrets/lake",
        },
    )
    assert (siem.tls, siem.port, siem.facility, siem.sd_id) == (True, 6514, 13, "audit@32473")
    assert (siem.batch_size, siem.timeout, siem.start) == (500, 10.0, "beginning")
    assert siem.where() == "syslog+tls://siem.example.net:6514"
    assert archive.where() == "file:///var/log/cp/audit.jsonl"
    # A collector's path and query may hold a token: they are never shown.
    assert lake.where() == "https://collector.example.net/…"
    plain = _parse({"name": "s", "kind": "syslog", "host": "h", "tls": False, "facility": "local3"})
    assert (plain[0].port, plain[0].facility, plain[0].where()) == (514, 19, "syslog://h:514")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "AUDIT_STREAMS is not valid JSON"),
        ('{"name": "x"}', "must be a JSON list"),
        ('["syslog"]', "AUDIT_STREAMS[0]: each destination must be a JSON object"),
    ],
)
def test_malformed_json_is_refused_in_words(text: str, message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=message.replace("[", r"\[").replace("]", r"\]")):
        audit_streams(text)


@pytest.mark.parametrize(
    ("destination", "message"),
    [
        ({"name": "x", "kind": "kafka"}, "kind must be one of syslog, file, http"),
        ({"name": "x", "kind": "file", "path": "/a", "url": "http://h/"}, "unknown field"),
        ({"name": "X Y", "kind": "file", "path": "/a"}, "name must be 1 to 63 lower-case"),
        ({"name": "x", "kind": "syslog"}, "host is required"),
        ({"name": "x", "kind": "syslog", "host": "h", "port": 70000}, "port must be a whole"),
        ({"name": "x", "kind": "syslog", "host": "h", "port": "514"}, "port must be a whole"),
        ({"name": "x", "kind": "syslog", "host": "h", "tls": "yes"}, "tls must be true or false"),
        (
            {"name": "x", "kind": "syslog", "host": "h", "tls": False, "ca_file": "/ca.pem"},
            "need tls",
        ),
        (
            {"name": "x", "kind": "syslog", "host": "h", "cert_file": "/c.pem"},
            "cert_file and key_file go together",
        ),
        ({"name": "x", "kind": "syslog", "host": "h", "ca_file": "ca.pem"}, "absolute path"),
        ({"name": "x", "kind": "syslog", "host": "h", "facility": "mail2"}, "facility must be"),
        ({"name": "x", "kind": "syslog", "host": "h", "sd_id": "a b"}, "sd_id must be"),
        ({"name": "x", "kind": "syslog", "host": "h", "app_name": "a" * 49}, "app_name must be"),
        ({"name": "x", "kind": "file"}, "path is required"),
        ({"name": "x", "kind": "file", "path": "audit.jsonl"}, "absolute path"),
        ({"name": "x", "kind": "http", "url": "ftp://h/"}, "url must be an http"),
        (
            {"name": "x", "kind": "http", "url": "https://u:p@h/"},
            "url may not carry a user name or password",
        ),
        ({"name": "x", "kind": "http", "url": "http://h/", "ca_file": "/ca"}, "need an https"),
        ({"name": "x", "kind": "file", "path": "/a", "timeout": 0}, "timeout must be seconds"),
        ({"name": "x", "kind": "file", "path": "/a", "batch_size": 0}, "batch_size must be"),
        ({"name": "x", "kind": "file", "path": "/a", "start": "now"}, "start must be"),
    ],
)
def test_a_destination_that_cannot_work_is_refused_naming_it(
    destination: dict[str, Any], message: str
) -> None:
    with pytest.raises(ImproperlyConfigured) as refused:
        _parse({"name": "ok", "kind": "file", "path": "/ok"}, destination)
    text = str(refused.value)
    assert text.startswith(f"AUDIT_STREAMS[1] ({destination['name']!r}): ")
    assert message in text


def test_two_destinations_may_not_share_a_name() -> None:
    with pytest.raises(ImproperlyConfigured, match="two destinations have this name"):
        _parse(
            {"name": "a", "kind": "file", "path": "/x"},
            {"name": "a", "kind": "file", "path": "/y"},
        )


@pytest.mark.parametrize("url", ["https://svc:hunter2@collector/", "ftp://svc:hunter2@collector/"])
def test_the_refusal_of_a_url_does_not_repeat_its_credentials(url: str) -> None:
    with pytest.raises(ImproperlyConfigured) as refused:
        _parse({"name": "x", "kind": "http", "url": url})
    assert "hunter2" not in str(refused.value)
