"""Signed checkpoints of the chain head, kept outside the database.

A hash chain shows an edited or missing event in the middle, but not the newest events cut
off, nor a chain recomputed from some point on by someone who can write to the database. So,
as CloudTrail does with its digest files, the head (sequence number and hash) is signed every
few minutes with an Ed25519 key from the environment and appended to a file the database
cannot reach. Each checkpoint also carries the previous checkpoint's signature, so lines
cannot be dropped from the file or reordered without breaking that second chain.

File: AUDIT_CHECKPOINT_DIR/checkpoints.jsonl, one canonical-JSON object per line:
    {"hash": ..., "key_id": ..., "prev_signature": ..., "seq": ..., "signature": ...,
     "time": ..., "v": 1}
The signature is Ed25519 over the canonical JSON of every field except `signature`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .chain import canonical_json

FILE_NAME = "checkpoints.jsonl"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Checkpoint:
    """One signed line of the checkpoint file; `line` is its 1-based number (0: not counted)."""

    seq: int
    hash: str
    time: str
    prev_signature: str
    key_id: str
    signature: str
    line: int = 0

    def body(self) -> dict[str, Any]:
        return {
            "v": FORMAT_VERSION,
            "seq": self.seq,
            "hash": self.hash,
            "time": self.time,
            "prev_signature": self.prev_signature,
            "key_id": self.key_id,
        }

    def to_line(self) -> str:
        return canonical_json({**self.body(), "signature": self.signature}) + "\n"


class CheckpointProblem(Exception):
    """The checkpoint file cannot vouch for the log: unreadable, forged, or out of order."""

    def __init__(self, problem: str, reason: str, *, line: int, seq: int | None) -> None:
        super().__init__(reason)
        self.problem = problem
        self.reason = reason
        self.line = line
        self.seq = seq


class CheckpointRefused(Exception):
    """A new checkpoint would contradict the last one (the log got shorter or was rewritten)."""


# --- keys ----------------------------------------------------------------------------------


def signing_key() -> Ed25519PrivateKey:
    try:
        seed = base64.b64decode(settings.AUDIT_SIGNING_KEY, validate=True)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise ImproperlyConfigured("AUDIT_SIGNING_KEY is not valid base64") from exc
    if len(seed) != 32:
        raise ImproperlyConfigured("AUDIT_SIGNING_KEY must be base64 of a 32-byte Ed25519 seed")
    return Ed25519PrivateKey.from_private_bytes(seed)


def public_key_text(key: Ed25519PublicKey) -> str:
    return base64.b64encode(key.public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()


def key_id(key: Ed25519PublicKey) -> str:
    return hashlib.sha256(key.public_bytes(Encoding.Raw, PublicFormat.Raw)).hexdigest()[:16]


def trusted_keys() -> dict[str, Ed25519PublicKey]:
    """Keys whose checkpoints verification accepts, by key id.

    The public half of AUDIT_SIGNING_KEY, plus any base64 raw public keys listed in
    AUDIT_TRUSTED_PUBLIC_KEYS (older keys after a rotation, or the only keys a verifier holds).
    """
    keys: list[Ed25519PublicKey] = []
    if getattr(settings, "AUDIT_SIGNING_KEY", None):
        keys.append(signing_key().public_key())
    for text in getattr(settings, "AUDIT_TRUSTED_PUBLIC_KEYS", []) or []:
        try:
            keys.append(Ed25519PublicKey.from_public_bytes(base64.b64decode(text, validate=True)))
        except (binascii.Error, ValueError) as exc:
            raise ImproperlyConfigured(f"not an Ed25519 public key: {text!r}") from exc
    return {key_id(k): k for k in keys}


def sign(body: dict[str, Any], key: Ed25519PrivateKey) -> str:
    return base64.b64encode(key.sign(canonical_json(body).encode())).decode()


def signature_valid(checkpoint: Checkpoint, keys: dict[str, Ed25519PublicKey]) -> bool:
    key = keys.get(checkpoint.key_id)
    if key is None:
        return False
    try:
        key.verify(
            base64.b64decode(checkpoint.signature, validate=True),
            canonical_json(checkpoint.body()).encode(),
        )
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


# --- the file ------------------------------------------------------------------------------


def default_path() -> Path:
    return Path(settings.AUDIT_CHECKPOINT_DIR) / FILE_NAME


def parse_line(text: str, line: int) -> Checkpoint:
    try:
        raw = json.loads(text)
        if raw.get("v") != FORMAT_VERSION:
            raise ValueError(f"unknown format version {raw.get('v')!r}")
        checkpoint = Checkpoint(
            seq=raw["seq"],
            hash=raw["hash"],
            time=raw["time"],
            prev_signature=raw["prev_signature"],
            key_id=raw["key_id"],
            signature=raw["signature"],
            line=line,
        )
        if type(checkpoint.seq) is not int or not all(
            isinstance(v, str)
            for v in (checkpoint.hash, checkpoint.time, checkpoint.prev_signature)
        ):
            raise ValueError("fields of the wrong type")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointProblem(
            "checkpoint_unreadable",
            f"checkpoint line {line} is unreadable ({exc})",
            line=line,
            seq=None,
        ) from exc
    return checkpoint


def load(path: Path | None = None) -> list[Checkpoint]:
    """Every checkpoint in the file, oldest first; none if there is no file yet."""
    path = path or default_path()
    try:
        with path.open(encoding="utf-8") as f:
            return [parse_line(text, n) for n, text in enumerate(f, start=1) if text.strip()]
    except FileNotFoundError:
        return []


def check(checkpoints: list[Checkpoint], keys: dict[str, Ed25519PublicKey]) -> None:
    """Raise CheckpointProblem for the first forged, unlinked or backwards checkpoint."""
    previous: Checkpoint | None = None
    for cp in checkpoints:
        if not signature_valid(cp, keys):
            why = "signed by an unknown key" if cp.key_id not in keys else "signature invalid"
            raise CheckpointProblem(
                "checkpoint_signature",
                f"checkpoint line {cp.line} (seq {cp.seq}): {why}",
                line=cp.line,
                seq=cp.seq,
            )
        expected = previous.signature if previous else ""
        if cp.prev_signature != expected:
            raise CheckpointProblem(
                "checkpoint_link",
                f"checkpoint line {cp.line} (seq {cp.seq}) does not follow the checkpoint "
                "before it: a checkpoint was removed, reordered or inserted",
                line=cp.line,
                seq=cp.seq,
            )
        if previous and cp.seq < previous.seq:
            raise CheckpointProblem(
                "checkpoint_order",
                f"checkpoint line {cp.line} signs seq {cp.seq}, below the previous "
                f"checkpoint's seq {previous.seq}",
                line=cp.line,
                seq=cp.seq,
            )
        previous = cp


def _last_line(f: IO[bytes]) -> str | None:
    """The file's last non-empty line, read backwards from the end (the file only grows)."""
    f.seek(0, os.SEEK_END)
    pos = f.tell()
    data = b""
    while pos > 0:
        step = min(4096, pos)
        pos -= step
        f.seek(pos)
        data = f.read(step) + data
        if b"\n" in data.rstrip(b"\n"):
            break
    text = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return text.decode("utf-8") if text.strip() else None


def last(path: Path | None = None) -> Checkpoint | None:
    """The newest checkpoint, without reading the whole file; its `line` is not known (0)."""
    try:
        with (path or default_path()).open("rb") as f:
            text = _last_line(f)
    except FileNotFoundError:
        return None
    return parse_line(text, 0) if text else None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[IO[bytes]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    with path.open("a+b") as f:
        # Beat should run one checkpoint at a time, but a manual run may overlap it; the lock
        # keeps two writers from signing the same predecessor and forking the file's chain.
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield f
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    if created:
        _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append(
    *, seq: int, head_hash: str, now: dt.datetime, path: Path | None = None
) -> Checkpoint | None:
    """Sign (seq, head_hash) and append it, unless it is what the last checkpoint already says.

    Refuses a head below the last checkpoint, or the same seq with another hash: either means
    the log was cut or rewritten, and signing it would bless that.
    """
    path = path or default_path()
    key = signing_key()
    with _locked(path) as f:
        last_text = _last_line(f)
        previous = parse_line(last_text, 0) if last_text else None
        if previous is not None:
            if seq == previous.seq and head_hash == previous.hash:
                return None
            if seq < previous.seq or (seq == previous.seq and head_hash != previous.hash):
                raise CheckpointRefused(
                    f"the log head (#{seq}) contradicts the last checkpoint (#{previous.seq}): "
                    "events were removed or rewritten; run verify_audit"
                )
        unsigned = Checkpoint(
            seq=seq,
            hash=head_hash,
            time=now.astimezone(dt.UTC).isoformat(),
            prev_signature=previous.signature if previous else "",
            key_id=key_id(key.public_key()),
            signature="",
        )
        checkpoint = replace(unsigned, signature=sign(unsigned.body(), key))
        f.seek(0, os.SEEK_END)
        f.write(checkpoint.to_line().encode())
        f.flush()
        os.fsync(f.fileno())
    return checkpoint
