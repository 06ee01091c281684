"""Canonical JSON and its SHA-256: the one encoding every digest in the control plane uses
(snapshot digests, what an approval is bound to, the audit chain).

Keys sorted, no whitespace, no ASCII escaping, anything JSON cannot hold written as str(), so
anyone can recompute a digest with any JSON library that sorts keys.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

canonical_json: Callable[[Any], str] = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
).encode


def canonical_digest(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()
