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

import re
from collections.abc import Iterator

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
# What the keyword list lacks, only as the name's last part: a `token` (hf_token, access_token,
# HUGGING_FACE_HUB_TOKEN) but not `tokens`, `tokenizer` or `max_tokens`; a `key` (api_key,
# FIELD_ENCRYPTION_KEY) but not `key_cache_dtype`; `auth`/`pass` (basic_auth, db_pass);
# `authorization` and `credentials` (HTTP headers, cloud SDKs) anywhere.
_LAST_PARTS = re.compile(
    r"(?:^|_)(?:token|key|auth|pass)$|(?:^|_)(?:authorization|credentials?)(?:_|$)"
)
# Names that hold no secret although they look like one: tokenizers' special tokens
# (`eos_token: </s>`), public and host keys (what engineers compare), and the shell's
# working directory (PWD, which the keyword list's `pwd` would hide).
_NOT_SECRET = re.compile(
    r"^(?:bos|eos|pad|unk|sep|cls|mask)_token$|(?:^|_)(?:public|host)_key|^pwd$"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def _name_parts(name: str) -> str:
    """`--hf-token`, `HF_TOKEN`, `hfToken` -> `hf_token`: lower case parts joined by `_`."""
    return "_".join(p for p in re.split(r"[^a-z0-9]+", _CAMEL.sub("_", name).lower()) if p)


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
    re.compile(r"\b[Bb]earer\s+([A-Za-z0-9._~+/-]+=*)"),
]
_TOKEN_PATTERNS = [*_library_patterns(), *_ADDED_PATTERNS]
_JWT_PATTERNS = frozenset(JwtTokenDetector.denylist)
# A matched token runs on over these (the JWT regex stops before the signature, GitLab's
# captures only the prefix).
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_+/=.-]*")
_SEPARATORS = " \t=:\"'"

# --- name = value ----------------------------------------------------------------------------

# An unquoted value: up to a space or quote; a comma, semicolon or ampersand ends it when a
# space, the end, or the next `name=` follows (`a=1, b=2`, `?token=x&b=2`), so a password with
# a comma in it is still hidden whole. Closing brackets after it are kept.
_BARE_CHAR = r"(?:[^\s'\",;&]|[,;&](?!\s|$|[\w.-]+\s*[=:]))"
_BARE = rf"(?![\[{{(]){_BARE_CHAR}+"
_VALUE = (
    r"(?:'(?P<sq>[^']*)'|\"(?P<dq>[^\"]*)\"|\[(?P<list>[^\]]*)\]"
    rf"|(?:(?:Bearer|Basic|Token|Digest)\s+)?(?P<bare>{_BARE}))"
)
# `NAME=value`, `NAME: value`, `'name': 'value'` (vLLM's args dict), `"name": "value"` (JSON),
# `--name=value`, `X-Api-Key: value`.
_ASSIGNMENT = re.compile(
    rf"(?<![\w.-])(?P<q>['\"]?)(?P<name>-{{0,2}}[A-Za-z_][\w.-]*)(?P=q)\s*(?::=|=>|=|:)\s*{_VALUE}"
)
# The engines' secret flags given as two words (`--api-key sk-x`, `--hf-token hf_x`): any flag
# whose name is secret-looking, followed by a word that is not another flag.
_FLAG = re.compile(rf"(?<![\w.-])(?P<name>--[A-Za-z][\w-]*)[ \t]+(?!-){_VALUE}")
# Values that hide nothing and say something (`'api_key': None`, `disable_auth=False`).
_PLAIN_VALUES = frozenset({"", "None", "null", "true", "false", "True", "False", REDACTED})

# --- private key blocks ----------------------------------------------------------------------

_KEY_BEGIN = [*PrivateKeyDetector.denylist]  # detect-secrets' BEGIN ... PRIVATE KEY headers
_KEY_END = re.compile(r"END [A-Z0-9 ]*PRIVATE KEY|END PGP PRIVATE KEY BLOCK|Private-MAC:")
_KEY_INLINE = re.compile(r"PRIVATE KEY(?: BLOCK)?-*(.*?)(?=-+\s*END |$)")
# A body line: a run of base64 at the end of the line (after a journal line's prefix, if any).
_KEY_BODY = re.compile(r"(?:^|[\s:])([A-Za-z0-9+/]{16,}={0,2})\s*$")
_KEY_HEADER = re.compile(r"(?:^|\s)[A-Z][A-Za-z-]+: \S")


def _value_span(match: re.Match[str]) -> tuple[int, int] | None:
    for group in ("sq", "dq", "list", "bare"):
        value = match.group(group)
        if value is None:
            continue
        start, end = match.span(group)
        if value.startswith(REDACTED):  # already redacted (a stored snapshot shown again)
            return None
        if group == "bare":  # closing brackets and a sentence's end stay
            stripped = value.rstrip(")]}>.")
            end -= len(value) - len(stripped)
            value = stripped
        if value.strip() in _PLAIN_VALUES:
            return None
        return start, end
    return None


def _spans(line: str) -> Iterator[tuple[int, int]]:
    """Where the secret values in one line are."""
    for pattern in _TOKEN_PATTERNS:
        for match in pattern.finditer(line):
            if pattern in _JWT_PATTERNS and not JwtTokenDetector.is_formally_valid(match[0]):
                continue
            groups = [i for i in range(1, (pattern.groups or 0) + 1) if match.group(i)]
            spans = [match.span(i) for i in groups] or [match.span()]
            for start, end in spans:
                while start < end and line[start] in _SEPARATORS:
                    start += 1
                while end > start and line[end - 1] in _SEPARATORS:
                    end -= 1
                tail = _TOKEN_TAIL.match(line, end)
                yield start, tail.end() if tail else end
    for pattern in (_ASSIGNMENT, _FLAG):
        for match in pattern.finditer(line):
            if is_secret_name(match.group("name")):
                span = _value_span(match)
                if span:
                    yield span


def _replace(line: str, spans: list[tuple[int, int]]) -> str:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces, done = [], 0
    for start, end in merged:
        pieces += [line[done:start], REDACTED]
        done = end
    pieces.append(line[done:])
    return "".join(pieces)


def _redact_line(line: str) -> str:
    spans = list(_spans(line))
    return _replace(line, spans) if spans else line


def redact_text(text: str) -> str:
    """Host text with every secret value replaced by `<redacted>`, line by line: the line
    structure, names and separators are kept byte for byte, and so is every line without a
    secret. A private key block keeps its BEGIN and END lines and loses its body."""
    out: list[str] = []
    in_key = body_seen = False
    for line in text.split("\n"):
        if in_key:
            body = _KEY_BODY.search(line)
            if _KEY_END.search(line):
                in_key = False
            elif body:
                body_seen = True
                out.append(line[: body.start(1)] + REDACTED)
                continue
            elif not line.strip() or (not body_seen and _KEY_HEADER.search(line)):
                out.append(line)  # `Proc-Type: 4,ENCRYPTED` and the blank line after it
                continue
            else:
                in_key = False  # not a key's line: the block ended without its END line
        elif any(p.search(line) for p in _KEY_BEGIN):
            out.append(_redact_key_line(line))
            inline = _KEY_INLINE.search(line)
            in_key = not _KEY_END.search(line) and not (inline and _key_material(inline[1]))
            body_seen = False
            continue
        out.append(_redact_line(line))
    return "\n".join(out)


def _key_material(text: str) -> bool:
    return bool(text.replace("\\n", "").strip(" \t\"',"))


def _redact_key_line(line: str) -> str:
    """A BEGIN line: a key printed on one line (JSON's `"-----BEGIN...\\n...\\n-----END..."`)
    loses what is between its markers."""
    spans = list(_spans(line))
    inline = _KEY_INLINE.search(line)
    if inline and _key_material(inline[1]):
        spans.append(inline.span(1))
    return _replace(line, spans) if spans else line


# Token shapes by their prefix alone: a value someone typed may be a short or test key that
# the patterns above (which need a real key's length) would let through.
# (`hf_` needs more: `hf_overrides` is a vLLM setting.)
_SECRET_PREFIX = re.compile(
    r"(?<![A-Za-z0-9])(?:sk-[A-Za-z0-9]|hf_[A-Za-z0-9]{20}|(?:AKIA|ASIA|AIza|ghp_|gho_|ghs_"
    r"|glpat-|xox[abposr]-|eyJ)[A-Za-z0-9_.+/=-]{4})"
)


def looks_secret(word: str) -> bool:
    """Whether a word (an argument, a value someone typed) holds or looks like a secret, so a
    message should not echo it: anything `redact_text` would hide, a `name=value` with a
    secret-looking name, or a word shaped like a token by its prefix (`sk-...`, `hf_...`)."""
    return redact_text(word) != word or bool(_SECRET_PREFIX.search(word))
