"""Secrets in host text: the one place that decides what is hidden and what stays readable.

Every path that shows or keeps text from a host (journal lines, `systemctl cat`, environment
files, snapshot sections and parsed state, pages, the API, audit payloads, logs) goes through
`redact_text`. It is built on the patterns of Yelp's detect-secrets (pinned in pyproject.toml):
its regex plugins find token shapes (AWS, JWT, URL userinfo, GitHub, Slack, ...), its keyword
detector's list names the secret-like variables. What it lacks for inference hosts is added
below, each with the reason.

Only the secret value is replaced, by `<redacted>`: names, quotes, commas and spaces stay as
they were, so `{'model': 'x', 'max_num_batched_tokens': 8192, 'api_key': '<redacted>'}` still
reads as vLLM printed it. Names are matched by whole parts (`hf_token`, `api-key`, `apiKey`),
so `max_num_batched_tokens`, `tokenizer` and `tokenizer_mode` are ordinary settings.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterator
from typing import Any

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.ip_public import IPPublicDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import DENYLIST as _KEYWORD_DENYLIST
from detect_secrets.plugins.private_key import PrivateKeyDetector

REDACTED = "<redacted>"

# --- secret-looking names --------------------------------------------------------------------

# Words that are secret wherever they stand, even inside a part (`DBPASSWORD`, `secretkey`):
# no ordinary engine setting contains them.
_ANYWHERE = re.compile(r"password|passwd|passphrase|secret|credential|apikey|privatekey")
# detect-secrets' keyword list (api_?key, password, secret, pwd, ...) as whole name parts.
_KEYWORD_PARTS = re.compile(r"(?:^|_)(?:{})(?:_|$)".format("|".join(_KEYWORD_DENYLIST)))
# What the keyword list lacks. As the name's last part only: a `token` (hf_token, access_token,
# HUGGING_FACE_HUB_TOKEN) but not `tokens`, `tokenizer` or `max_tokens`; a `key` after another
# part (FIELD_ENCRYPTION_KEY) but not `key_cache_dtype` nor a bare `key` (`host key: ...`,
# `sort key: ...`); `pass` (db_pass). As a whole part anywhere:
# `auth` (AUTH_HEADER, basic_auth), `authorization` and `credentials` (HTTP headers, cloud SDKs).
_LAST_PARTS = re.compile(
    r"(?:^|_)(?:token|pass)$|_key$|(?:^|_)(?:auth|authorization|credentials?)(?:_|$)"
)
# Names that hold no secret although they look like one: tokenizers' special tokens
# (`eos_token: </s>`), public and host keys (what engineers compare), the shell's working
# directory (PWD, which the keyword list's `pwd` would hide), and names that say what kind of
# secret or where it is rather than what it is (`auth_type`, `hf_token_path`, `key_file`).
_NOT_SECRET = re.compile(
    r"^(?:bos|eos|pad|unk|sep|cls|mask)_token$|(?:^|_)(?:public|host)_key|^pwd$"
    r"|_(?:type|method|mode|scheme|enabled|disabled|required|file|path|dir|url|uri)$"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _name_parts(name: str) -> str:
    """`--hf-token`, `HF_TOKEN`, `hfToken` -> `hf_token`: lower case parts joined by `_`."""
    return "_".join(p for p in re.split(r"[^a-z0-9]+", _CAMEL.sub("_", name).lower()) if p)


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a variable, key, header or flag name says its value is a secret."""
    parts = _name_parts(name)
    if not parts or _NOT_SECRET.search(parts):
        return False
    return bool(
        _ANYWHERE.search(parts.replace("_", ""))
        or _KEYWORD_PARTS.search(parts)
        or _LAST_PARTS.search(parts)
    )


# --- token shapes ----------------------------------------------------------------------------


def _library_patterns() -> list[re.Pattern[str]]:
    """Every regex of detect-secrets' regex plugins, but for the public IP one (addresses are
    what engineers read here) and the private key one (a key is a block of lines, below)."""
    skip = (IPPublicDetector, PrivateKeyDetector)
    patterns: list[re.Pattern[str]] = []
    plugin: type
    for plugin in get_mapping_from_secret_type_to_class().values():
        if issubclass(plugin, RegexBasedDetector) and not issubclass(plugin, skip):
            patterns += list(plugin.denylist)
    return patterns


_ADDED_PATTERNS = [
    # Hugging Face access tokens (`hf_` and 34 letters): what every model download uses.
    re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}"),
    # Google API keys (`AIza...`), e.g. in a GCP service account's environment.
    re.compile(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}"),
    # OpenAI-style keys (`sk-proj-...`, `sk-ant-...`): the library knows only the legacy form
    # with `T3BlbkFJ` inside; vLLM and SGLang take such keys as their --api-key.
    re.compile(r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{16,}"),
    # A bearer token anywhere (`curl -H "Authorization: Bearer ..."`, an error quoting it).
    re.compile(r"\b[Bb]earer[ \t]+([A-Za-z0-9._~+/-]+=*)"),
]
_TOKEN_PATTERNS = [*_library_patterns(), *_ADDED_PATTERNS]
_JWT_PATTERNS = frozenset(JwtTokenDetector.denylist)

# detect-secrets' keyword detectors (IBM Cloud IAM, IBM COS HMAC, Cloudant, SoftLayer, and its AWS
# secret pattern) try a long alternation at every position of a text: half the time of redacting
# a short JSON answer that changes on every probe. Each can match only where one of its key
# words is, so a text without any of them skips those patterns. A pattern is skipped only if it
# holds one of these groups as a required part (not followed by ?, * or {0, not one side of a
# |); any other runs always.
_KEYWORD_GROUPS = (
    "(?:key|pwd|pw|password|pass|token)",
    "(?:key|pwd|password|pass|token)",
    "(?:secret[-_]?(?:access)?[-_]?key)",
)
# in every group above; case-insensitive, so it finds them in any case a pattern may match
_KEYWORD_WORDS = re.compile("key|pw|pass|token", re.IGNORECASE)


def _requires_keyword(pattern: re.Pattern[str]) -> bool:
    source = pattern.pattern
    for group in _KEYWORD_GROUPS:
        at = source.find(group)
        if at < 0:
            continue
        after = source[at + len(group) : at + len(group) + 2]
        if source[at - 1 : at] != "|" and after[:1] not in ("?", "*", "|") and after != "{0":
            return True
    return False


_KEYWORD_PATTERNS = frozenset(p for p in _TOKEN_PATTERNS if _requires_keyword(p))
# A matched token runs on over these (the JWT regex stops before the signature, GitLab's
# captures only the prefix).
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_+/=.-]*")
_SEPARATORS = " \t\r\n=:\"'"

# --- name = value ----------------------------------------------------------------------------

# An unquoted value: up to a space or quote; a comma, semicolon or ampersand ends it when a
# space, the end, or the next `name=` follows (`a=1, b=2`, `?token=x&b=2`), so a password with
# a comma in it is still hidden whole. Closing brackets after it are kept.
_BARE_CHAR = r"(?:[^\s'\",;&]|[,;&](?!\s|$|[\w.-]+[ \t]*[=:]))"
_VALUE = (
    r"(?:'(?P<sq>[^'\n]*)'|\"(?P<dq>[^\"\n]*)\"|\[(?P<list>[^\]\n]*)\]"
    rf"|(?:(?:Bearer|Basic|Token|Digest)[ \t]+)?(?P<bare>(?![\[{{(]){_BARE_CHAR}+))"
)
# Every secret-looking name holds one of these: the names around them are the only ones
# tried (a quick filter: most names in a journal or a metrics page are not).
_HINT = re.compile(r"pass|pwd|secret|token|key|auth|credential|priv|contrase", re.IGNORECASE)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
# `NAME=value`, `NAME: value`, `'name': 'value'` (vLLM's args dict), `"name": "value"` (JSON),
# `--name=value`, `X-Api-Key: value`.
_ASSIGNMENT = re.compile(
    r"(?<![\w.-])(?P<q>['\"]?)(?P<name>-{0,2}[A-Za-z_][\w.-]*)(?P=q)"
    rf"[ \t]*(?::=|=>|=|:)[ \t]*{_VALUE}"
)
# The engines' secret flags given as two words (`--api-key sk-x`, `--hf-token hf_x`): any flag
# whose name is secret-looking, followed by a word that is not another flag.
_FLAG = re.compile(rf"(?<![\w.-])(?P<name>--[A-Za-z][\w-]*)[ \t]+(?!-){_VALUE}")
# Values that hide nothing and say something (`'api_key': None`, `disable_auth=False`).
_PLAIN_VALUES = frozenset({"", "None", "null", "true", "false", "True", "False"})

# --- private key blocks ----------------------------------------------------------------------

_KEY_BEGIN = [*PrivateKeyDetector.denylist]  # detect-secrets' BEGIN ... PRIVATE KEY headers
_KEY_MARKERS = ("PRIVATE KEY", "PuTTY-User-Key-File")  # a quick filter for the above
_KEY_END = re.compile(r"END [A-Z0-9 ]*PRIVATE KEY|END PGP PRIVATE KEY BLOCK|Private-MAC:")
# A key printed on one line (JSON's `"-----BEGIN...\\n...\\n-----END..."`): between its markers.
_KEY_INLINE = re.compile(r"PRIVATE KEY(?: BLOCK)?-*(.*?)(?=-+[ \t]*END |$)")
# A body line: one run of base64 that is the whole line (after a journal line's prefix).
_KEY_BODY = re.compile(r"(?:^\s*|: )([A-Za-z0-9+/]{4,}={0,2})\s*$")
_KEY_HEADER = re.compile(r"(?:^|\s)[A-Z][A-Za-z-]+: \S")  # Proc-Type: 4,ENCRYPTED


def _value_span(match: re.Match[str]) -> tuple[int, int] | None:
    for group in ("sq", "dq", "list", "bare"):
        value = match.group(group)
        if value is None:
            continue
        start, end = match.span(group)
        if value.lstrip(" '\"").startswith(REDACTED):  # already redacted (shown again)
            return None
        if group == "bare":  # closing brackets and a sentence's end stay
            stripped = value.rstrip(")]}>.")
            end -= len(value) - len(stripped)
            value = stripped
        if value.strip() in _PLAIN_VALUES:
            return None
        return start, end
    return None


def _token_spans(text: str) -> Iterator[tuple[int, int]]:
    keywords = _KEYWORD_WORDS.search(text) is not None
    for pattern in _TOKEN_PATTERNS:
        if not keywords and pattern in _KEYWORD_PATTERNS:
            continue
        for match in pattern.finditer(text):
            if pattern in _JWT_PATTERNS and not JwtTokenDetector.is_formally_valid(match[0]):
                continue
            # A plugin's groups are its secrets (findall's rule); without groups, the match.
            groups = [i for i in range(1, pattern.groups + 1) if match.group(i)]
            for start, end in [match.span(i) for i in groups] or [match.span()]:
                while start < end and text[start] in _SEPARATORS:
                    start += 1
                while end > start and text[end - 1] in _SEPARATORS:
                    end -= 1
                tail = _TOKEN_TAIL.match(text, end)
                yield start, tail.end() if tail else end


def _assignment_spans(text: str) -> Iterator[tuple[int, int]]:
    """The values of secret-looking names: each name holding a hint, tried where it starts."""
    tried = -1
    for hint in _HINT.finditer(text):
        start = hint.start()
        while start > 0 and text[start - 1] in _NAME_CHARS:
            start -= 1
        if start == tried:
            continue  # one name, two hints (`secret_token`)
        tried = start
        if start > 0 and text[start - 1] in "'\"":
            match = _ASSIGNMENT.match(text, start - 1)
        else:
            match = None
        match = match or _ASSIGNMENT.match(text, start) or _FLAG.match(text, start)
        if match and is_secret_name(match.group("name")):
            span = _value_span(match)
            if span:
                yield span


def _key_spans(text: str) -> Iterator[tuple[int, int]]:
    """The bodies of private key blocks: from a BEGIN line (detect-secrets' headers) to its
    END line, each body line's base64; a line that is none of a key's ends the block."""
    in_key = body_seen = False
    offset = 0
    for line in text.split("\n"):
        at, offset = offset, offset + len(line) + 1
        if in_key:
            if _KEY_END.search(line):
                in_key = False
                continue
            body = _KEY_BODY.search(line)
            if body:
                body_seen = True
                yield at + body.start(1), at + len(line.rstrip())
                continue
            if not line.strip() or (not body_seen and _KEY_HEADER.search(line)):
                continue
            in_key = False  # not a key's line: the block ended without its END line
        if any(p.search(line) for p in _KEY_BEGIN):
            inline = _KEY_INLINE.search(line)
            material = inline and inline[1].replace("\\n", "").strip(" \t\"',")
            if inline and material:
                yield at + inline.start(1), at + inline.end(1)
            in_key = not material and not _KEY_END.search(line)
            body_seen = False


def _replace(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each span (merged where they overlap) replaced by REDACTED. A span never
    runs over a line's end: the line structure stays."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        newline = text.find("\n", start, end)
        end = newline if newline >= 0 else end
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces, done = [], 0
    for start, end in merged:
        pieces += [text[done:start], REDACTED]
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


def redact_text(text: str) -> str:
    """Host text with every secret value replaced by `<redacted>`: the line structure, names
    and separators are kept byte for byte, and so is every line without a secret. A private
    key block keeps its BEGIN and END lines and loses its body."""
    spans = [*_token_spans(text), *_assignment_spans(text)]
    if any(marker in text for marker in _KEY_MARKERS):
        spans += _key_spans(text)
    return _replace(text, spans) if spans else text


def redact_data(value: Any) -> Any:
    """JSON-shaped data (a snapshot's parsed state) as it may be shown: every string through
    `redact_text`, and the string value of every secret-looking key replaced. A new value; the
    argument is left as it is."""
    if isinstance(value, dict):
        return {
            k: REDACTED if isinstance(v, str) and v and is_secret_name(str(k)) else redact_data(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_data(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


# Token shapes by their prefix alone: a value someone typed may be a short or test key that
# the patterns above (which need a real key's length) would let through. (`hf_` needs more:
# `hf_overrides` is a vLLM setting.)
_SECRET_PREFIX = re.compile(
    r"(?<![A-Za-z0-9])(?:sk-[A-Za-z0-9]|hf_[A-Za-z0-9]{20}|(?:AKIA|ASIA|AIza|ghp_|gho_|ghs_"
    r"|glpat-|xox[abposr]-|eyJ)[A-Za-z0-9_.+/=-]{4})"
)


def looks_secret(word: str) -> bool:
    """Whether a word (an argument, a value someone typed) holds or looks like a secret, so a
    message should not echo it: anything `redact_text` would hide (a token, `name=value` with
    a secret-looking name) or a word shaped like a token by its prefix (`sk-...`, `hf_...`)."""
    return redact_text(word) != word or bool(_SECRET_PREFIX.search(word))


class RedactingFilter(logging.Filter):
    """A log handler's filter: each record's message, and its traceback, through `redact_text`
    (an exception may quote host output). Wired to the handlers in settings.LOGGING and to
    Celery's own (controlplane.celery)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        shown = redact_text(message)
        if shown != message:
            record.msg, record.args = shown, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True
