"""The bytes a receiver gets, and how it knows they came from us.

The body is compact JSON: the stored payload (Slack's `text` and `blocks`, plus `event` and
`data`) with the delivery id and the attempt's Unix timestamp added. The signature is
HMAC-SHA256 over exactly those bytes with the endpoint's secret, so it covers the timestamp
too: a receiver that checks the signature and rejects old timestamps cannot be replayed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

SIGNATURE_HEADER = "X-Controlplane-Signature"
EVENT_HEADER = "X-Controlplane-Event"
DELIVERY_HEADER = "X-Controlplane-Delivery"
TIMESTAMP_HEADER = "X-Controlplane-Timestamp"
ATTEMPT_HEADER = "X-Controlplane-Attempt"


def body_bytes(payload: dict[str, Any], *, delivery_id: int, timestamp: int) -> bytes:
    document = {**payload, "delivery": delivery_id, "timestamp": timestamp}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: str, body: bytes) -> str:
    """The X-Controlplane-Signature value: `sha256=` and the hex HMAC of the raw body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signature_valid(secret: str, body: bytes, header: str) -> bool:
    """What a receiver does (in constant time), before parsing the body."""
    return hmac.compare_digest(signature(secret, body).encode(), (header or "").encode())
