"""SSH keys kept in the state dir: each host's own (and rotated) key, and the client's."""

from __future__ import annotations

import os
from pathlib import Path

import asyncssh


def public_key_text(key: asyncssh.SSHKey) -> str:
    """`ssh-ed25519 AAAA...` without a comment: what a client sees and the control plane pins."""
    return " ".join(key.export_public_key("openssh").decode().split()[:2])


def load_or_create_key(path: Path) -> asyncssh.SSHKey:
    """Keys survive restarts so a registered fleet keeps matching its pinned host keys."""
    if path.exists():
        return asyncssh.read_private_key(str(path))
    key = asyncssh.generate_private_key("ssh-ed25519", comment=path.stem)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.export_private_key("openssh"))
    os.replace(tmp, path)
    pub = path.with_name(path.name + ".pub")
    pub.write_bytes(key.export_public_key("openssh"))
    return key
