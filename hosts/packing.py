"""Probe sections as bytes, and those bytes compressed with zstd (pure: no database).

A section record is a header line (name, exit status, whether the output was cut, the output's
length in bytes) followed by the output as UTF-8. A blob holds one record with an empty name; a
snapshot's `raw_packed` holds the records of the sections that change on every probe, one after
another, behind the SHA-256 of the records (`pack_sections`). Both are compressed with a zstd
dictionary trained on the fleet's own records (`hosts.models.SectionDictionary`): these are short
texts that repeat from probe to probe and host to host (column headers, GPU names and UUIDs, unit
directives), which a dictionary compresses several times better than zstd alone. Frames carry
neither the dictionary's id (the row names it) nor a checksum (the SHA-256 does that).

Anything that does not decode (truncated, altered, the wrong dictionary) raises `PackingError`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import zstandard

LEVEL = 3  # higher levels buy a few per cent on these sizes at several times the CPU
SHA_BYTES = 32


class PackingError(Exception):
    """Stored bytes that do not decode into the sections they were made from."""


def record_of(name: str, section: dict[str, Any]) -> bytes:
    """One section as a record: `name<TAB>exit<TAB>truncated<TAB>length\\n` then the output."""
    output = str(section.get("output", "")).encode("utf-8", "surrogatepass")
    status = section.get("exit_status")
    header = "\t".join(
        [name, "" if status is None else str(int(status)), "1" if section.get("truncated") else "0"]
    )
    return f"{header}\t{len(output)}\n".encode() + output


def records_read(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The (name, section) records in `data`, in order."""
    out = []
    position = 0
    while position < len(data):
        end = data.find(b"\n", position)
        if end < 0:
            raise PackingError("a section record's header is cut")
        try:
            name, exit_text, truncated, length = data[position:end].decode().split("\t")
            size = int(length)
            exit_status = int(exit_text) if exit_text else None
        except ValueError as exc:
            raise PackingError("a section record's header does not read") from exc
        body = data[end + 1 : end + 1 + size]
        if len(body) != size or truncated not in ("0", "1"):
            raise PackingError("a section record is cut")
        output = body.decode("utf-8", "surrogatepass")
        out.append(
            (name, {"output": output, "exit_status": exit_status, "truncated": truncated == "1"})
        )
        position = end + 1 + size
    return out


def prepare(content: bytes) -> zstandard.ZstdCompressionDict:
    """A dictionary ready for use; its caller keeps it (hosts.models caches one per row)."""
    prepared = zstandard.ZstdCompressionDict(bytes(content))
    prepared.precompute_compress(level=LEVEL)
    return prepared


Dictionary = zstandard.ZstdCompressionDict | None


def compress(data: bytes, dictionary: Dictionary) -> bytes:
    compressor = zstandard.ZstdCompressor(
        level=LEVEL,
        dict_data=dictionary,
        write_checksum=False,
        write_dict_id=False,
        write_content_size=True,
    )
    return compressor.compress(data)


def decompress(data: bytes | memoryview, dictionary: Dictionary) -> bytes:
    decompressor = zstandard.ZstdDecompressor(dict_data=dictionary)
    try:
        return decompressor.decompress(bytes(data))
    except zstandard.ZstdError as exc:
        raise PackingError(f"compressed section output does not decompress: {exc}") from exc


def pack_sections(sections: list[tuple[str, dict[str, Any]]], dictionary: Dictionary) -> bytes:
    """The SHA-256 of the sections' records, then the records compressed."""
    plain = b"".join(record_of(name, section) for name, section in sections)
    return hashlib.sha256(plain).digest() + compress(plain, dictionary)


def unpack_sections(
    packed: bytes | memoryview, dictionary: Dictionary
) -> list[tuple[str, dict[str, Any]]]:
    """What `pack_sections` packed, checked against its SHA-256."""
    packed = bytes(packed)
    if len(packed) <= SHA_BYTES:
        raise PackingError("packed section output is cut")
    plain = decompress(packed[SHA_BYTES:], dictionary)
    if hashlib.sha256(plain).digest() != packed[:SHA_BYTES]:
        raise PackingError("packed section output does not match its SHA-256")
    return records_read(plain)


def pack_json(value: Any, dictionary: Dictionary) -> str:
    """`value` as compact JSON, compressed behind its SHA-256, as base64 text (to sit in JSON)."""
    plain = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    packed = hashlib.sha256(plain).digest() + compress(plain, dictionary)
    return base64.b64encode(packed).decode("ascii")


def unpack_json(text: Any, dictionary: Dictionary) -> Any:
    """What `pack_json` packed, checked against its SHA-256."""
    try:
        packed = base64.b64decode(str(text), validate=True)
    except ValueError as exc:
        raise PackingError("packed JSON is not base64") from exc
    if len(packed) <= SHA_BYTES:
        raise PackingError("packed JSON is cut")
    plain = decompress(packed[SHA_BYTES:], dictionary)
    if hashlib.sha256(plain).digest() != packed[:SHA_BYTES]:
        raise PackingError("packed JSON does not match its SHA-256")
    return json.loads(plain)


def jsonb_ordered(value: Any) -> Any:
    """`value` with every object's keys in PostgreSQL jsonb's order (shorter first, then by
    bytes): what a jsonb column gives back, so JSON assembled in Python reads the same."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return {k: jsonb_ordered(value[k]) for k in keys}
    if isinstance(value, list):
        return [jsonb_ordered(item) for item in value]
    return value


def train(samples: list[bytes], size: int) -> bytes:
    """A dictionary of at most `size` bytes trained on `samples` (section records)."""
    try:
        inputs: list[bytes | bytearray | memoryview] = list(samples)
        return zstandard.train_dictionary(size, inputs, level=LEVEL).as_bytes()
    except zstandard.ZstdError as exc:
        raise PackingError(
            f"could not train a dictionary on {len(samples)} sections: {exc}"
        ) from exc
