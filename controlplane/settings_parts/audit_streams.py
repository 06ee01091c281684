"""AUDIT_STREAMS: where the audit trail is streamed (syslog, a JSON Lines file, an HTTP
collector), read from the environment as JSON and refused at start, naming the destination and
the field, when it cannot work.

Destinations are deployment settings rather than rows an administrator edits in the app: the
feed to the SIEM is a control over the people the log records, so silencing or redirecting it
should take access to the deployment, not an account in the product (a SIEM keeps evidence out
of reach of those it watches). Their keys and tokens stay in files the workers read (TLS keys,
an Authorization header), never in the database, the environment's JSON, a page or a log.

    AUDIT_STREAMS='[
      {"name": "siem", "kind": "syslog", "host": "siem.example.net", "port": 6514,
       "ca_file": "/etc/controlplane/siem-ca.pem",
       "cert_file": "/etc/controlplane/client.pem", "key_file": "/etc/controlplane/client.key"},
      {"name": "archive", "kind": "file", "path": "/var/log/controlplane/audit.jsonl"},
      {"name": "lake", "kind": "http", "url": "https://collector.example.net/audit",
       "authorization_file": "/run/secrets/collector-authorization"}
    ]'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

SYSLOG, FILE, HTTP = "syslog", "file", "http"
KINDS = (SYSLOG, FILE, HTTP)
START_BEGINNING, START_HEAD = "beginning", "head"

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
# RFC 5424 6.2.1: facilities by number; the names are those syslog.conf and rsyslog use.
FACILITIES = {
    "kern": 0, "user": 1, "mail": 2, "daemon": 3, "auth": 4, "syslog": 5, "lpr": 6, "news": 7,
    "uucp": 8, "cron": 9, "authpriv": 10, "ftp": 11, "ntp": 12, "audit": 13, "alert": 14,
    "clock": 15, **{f"local{n}": 16 + n for n in range(8)},
}  # fmt: skip
# RFC 5424 6.3.2: an SD-ID with "@" names its owner by IANA enterprise number; 32473 is the one
# RFC 5612 reserves for documentation, used until an operator sets their own.
SD_ID_PATTERN = re.compile(r"[!#-\\^-~]{1,32}")  # printable ASCII but '"', ']' and '='
PRINTABLE_ASCII = re.compile(r"[!-~]+")


@dataclass(frozen=True)
class StreamDestination:
    """One place the audit trail streams to. `kind` says which fields apply."""

    name: str
    kind: str
    start: str = START_BEGINNING  # a new destination starts at seq 1 or at the head
    batch_size: int = 500
    timeout: float = 10.0
    # syslog (RFC 5424 over TCP, octet-counted per RFC 6587; TLS per RFC 5425 unless tls=false)
    host: str = ""
    port: int = 0
    tls: bool = True
    server_name: str = ""  # the name the certificate must carry (default: host)
    facility: int = FACILITIES["audit"]
    app_name: str = "gpu-controlplane"
    hostname: str = ""  # HOSTNAME field (default: this machine's FQDN)
    sd_id: str = "audit@32473"
    max_message_bytes: int = 65536
    # http
    url: str = ""
    authorization_file: str = ""
    # TLS for syslog and https
    ca_file: str = ""  # default: the system's trust store
    cert_file: str = ""
    key_file: str = ""
    # file
    path: str = ""

    def where(self) -> str:
        """Where it goes, as pages and logs may show it: no path or query of a URL (a
        collector's URL may carry a token), no file contents, no key."""
        if self.kind == SYSLOG:
            return f"syslog{'+tls' if self.tls else ''}://{self.host}:{self.port}"
        if self.kind == HTTP:
            parts = urlsplit(self.url)
            rest = "…" if parts.path not in ("", "/") or parts.query else ""
            return f"{parts.scheme}://{parts.netloc}/{rest}"
        return f"file://{self.path}"


COMMON = {"name", "kind", "start", "batch_size", "timeout"}
TLS_FILES = {"ca_file", "cert_file", "key_file"}
ALLOWED = {
    SYSLOG: COMMON | TLS_FILES | {
        "host", "port", "tls", "server_name", "facility", "app_name", "hostname", "sd_id",
        "max_message_bytes",
    },
    FILE: COMMON | {"path"},
    HTTP: COMMON | TLS_FILES | {"url", "authorization_file"},
}  # fmt: skip


class _Refuse(Exception):
    pass


def _int(raw: dict[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    value = raw.get(key, default)
    if type(value) is not int or not lo <= value <= hi:
        raise _Refuse(f"{key} must be a whole number from {lo} to {hi}, not {value!r}")
    return value


def _text(raw: dict[str, Any], key: str, default: str = "") -> str:
    value = raw.get(key, default)
    if not isinstance(value, str):
        raise _Refuse(f"{key} must be a string, not {value!r}")
    return value.strip()


def _absolute(raw: dict[str, Any], key: str) -> str:
    value = _text(raw, key)
    if value and not PurePosixPath(value).is_absolute():
        raise _Refuse(f"{key} must be an absolute path, not {value!r}")
    return value


def _facility(raw: dict[str, Any]) -> int:
    value = raw.get("facility", "audit")
    if isinstance(value, str) and value in FACILITIES:
        return FACILITIES[value]
    if type(value) is int and 0 <= value <= 23:
        return value
    raise _Refuse(f"facility must be 0 to 23 or one of {', '.join(FACILITIES)}, not {value!r}")


def _syslog(raw: dict[str, Any], fields: dict[str, Any]) -> None:
    fields["host"] = _text(raw, "host")
    if not fields["host"]:
        raise _Refuse("host is required for a syslog destination")
    tls = raw.get("tls", True)
    if not isinstance(tls, bool):
        raise _Refuse(f"tls must be true or false, not {tls!r}")
    fields["tls"] = tls
    # 6514 is syslog over TLS (RFC 5425); plain TCP syslog has no assigned port, 514 is usual.
    fields["port"] = _int(raw, "port", 6514 if tls else 514, 1, 65535)
    fields["server_name"] = _text(raw, "server_name")
    fields["facility"] = _facility(raw)
    header_fields = (("app_name", StreamDestination.app_name, 48), ("hostname", "", 255))
    for key, default, limit in header_fields:
        value = _text(raw, key, default)
        if value and (len(value) > limit or not PRINTABLE_ASCII.fullmatch(value)):
            raise _Refuse(f"{key} must be 1 to {limit} printable ASCII characters, not {value!r}")
        fields[key] = value
    sd_id = _text(raw, "sd_id", StreamDestination.sd_id)
    if not SD_ID_PATTERN.fullmatch(sd_id) or "=" in sd_id:
        raise _Refuse(f"sd_id must be an RFC 5424 SD-ID such as audit@32473, not {sd_id!r}")
    fields["sd_id"] = sd_id
    fields["max_message_bytes"] = _int(raw, "max_message_bytes", 65536, 2048, 16 * 1024 * 1024)
    if not tls and (TLS_FILES | {"server_name"}) & raw.keys():
        raise _Refuse("ca_file, cert_file, key_file and server_name need tls (it is false)")


def _http(raw: dict[str, Any], fields: dict[str, Any]) -> None:
    url = _text(raw, "url")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        # Not repeated back: a URL may carry a credential.
        raise _Refuse("url must be an http:// or https:// URL with a host")
    if "@" in parts.netloc:
        raise _Refuse(
            "url may not carry a user name or password (it would show wherever the "
            "destination is shown): put the credential in authorization_file"
        )
    try:
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        raise _Refuse("url's port is not a number from 1 to 65535") from None
    if parts.scheme == "http" and TLS_FILES & raw.keys():
        raise _Refuse("ca_file, cert_file and key_file need an https:// url")
    fields["url"] = url
    fields["authorization_file"] = _absolute(raw, "authorization_file")


def _destination(raw: Any, names: set[str]) -> StreamDestination:
    if not isinstance(raw, dict):
        raise _Refuse(f"each destination must be a JSON object, not {raw!r}")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise _Refuse(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    unknown = sorted(set(raw) - ALLOWED[kind])
    if unknown:
        raise _Refuse(f"unknown field(s) for a {kind} destination: {', '.join(unknown)}")
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise _Refuse(f"name must be 1 to 63 lower-case letters, digits, '-' or '_', not {name!r}")
    if name in names:
        raise _Refuse("two destinations have this name")
    start = raw.get("start", START_BEGINNING)
    if start not in (START_BEGINNING, START_HEAD):
        raise _Refuse(f"start must be {START_BEGINNING!r} or {START_HEAD!r}, not {start!r}")
    timeout = raw.get("timeout", StreamDestination.timeout)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 300:
        raise _Refuse(f"timeout must be seconds, above 0 and at most 300, not {timeout!r}")
    fields: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "start": start,
        "batch_size": _int(raw, "batch_size", 500, 1, 10_000),
        "timeout": float(timeout),
    }
    if kind == SYSLOG:
        _syslog(raw, fields)
    elif kind == HTTP:
        _http(raw, fields)
    else:
        fields["path"] = _absolute(raw, "path")
        if not fields["path"]:
            raise _Refuse("path is required for a file destination")
    for key in TLS_FILES & ALLOWED[kind]:
        fields[key] = _absolute(raw, key)
    if bool(fields.get("cert_file")) != bool(fields.get("key_file")):
        raise _Refuse("cert_file and key_file go together (a client certificate and its key)")
    return StreamDestination(**fields)


def audit_streams(text: str) -> tuple[StreamDestination, ...]:
    """AUDIT_STREAMS parsed, or ImproperlyConfigured naming the destination and what is wrong.

    Files named here are read when sending (a worker may mount them after the web process
    starts); one that cannot be read shows as the destination's error, in words."""
    if not text.strip():
        return ()
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(f"AUDIT_STREAMS is not valid JSON: {exc}") from None
    if not isinstance(raw, list):
        raise ImproperlyConfigured("AUDIT_STREAMS must be a JSON list of destinations")
    out: list[StreamDestination] = []
    for index, item in enumerate(raw):
        label = f"AUDIT_STREAMS[{index}]"
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            label += f" ({item['name']!r})"
        try:
            out.append(_destination(item, {d.name for d in out}))
        except _Refuse as exc:
            raise ImproperlyConfigured(f"{label}: {exc}") from None
    return tuple(out)
