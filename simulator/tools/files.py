"""Programs that read and write files: cat, sha256sum, tee, and the shell's `>` redirections.

The host's only writable files are unit files, their drop-ins and the environment files in
/etc/vllm (by root); everything else is read-only.
"""

from __future__ import annotations

import hashlib
import posixpath
from typing import TYPE_CHECKING

from .. import catalog
from .interface import Context, Result

if TYPE_CHECKING:
    from ..shell import Session


def needs_stdin(name: str, argv: list[str]) -> bool:
    """Only programs that would read stdin wait for it (the client may never send EOF)."""
    files = [a for a in argv[1:] if not a.startswith("-") or a == "-"]
    if name == "tee":
        return True
    if name in ("cat", "sha256sum"):
        return not files or "-" in files
    return False


_CONFIG_DIR = posixpath.dirname(catalog.ENV_FILE)  # /etc/vllm: environment files


def _root_may_write(path: str) -> bool:
    """Unit files, drop-ins (`<unit>.d/*.conf`) and environment files are root's to write."""
    directory, name = posixpath.split(path)
    if not name:
        return False
    drop_in_dir = posixpath.dirname(directory) == catalog.UNIT_DIR and directory.endswith(".d")
    return directory in (catalog.UNIT_DIR, _CONFIG_DIR) or drop_in_dir


def writable(session: Session, path: str) -> str:
    """Why a shell redirection may not write `path` ("" when it may)."""
    if _root_may_write(path):
        return "" if session.is_root else "Permission denied"
    return "Read-only file system"


def _is_dir(path: str) -> bool:
    path = path.rstrip("/")
    if path in ("", "/etc", "/etc/systemd", catalog.UNIT_DIR, "/models", _CONFIG_DIR):
        return True
    return posixpath.dirname(path) == catalog.UNIT_DIR and path.endswith(".d")


def cat(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    files = [a for a in argv[1:] if a != "--"]
    if not files:
        return result.out(stdin)
    for path in files:
        if path == "-":
            result.out(stdin)
            continue
        text = ctx.machine.read_file(path)
        if _is_dir(path):
            result.err(f"cat: {path}: Is a directory\n").exit(1)
        elif text is None:
            result.err(f"cat: {path}: No such file or directory\n").exit(1)
        else:
            result.out(text)
    return result


def sha256sum(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    files: list[str] = []
    ended = False
    for arg in argv[1:]:
        if not ended and arg == "--":
            ended = True
        elif not ended and arg.startswith("-") and arg != "-":
            if arg in ("-b", "--binary", "-t", "--text"):
                continue
            return result.err(
                f"sha256sum: unrecognized option '{arg}'\n"
                "Try 'sha256sum --help' for more information.\n"
            ).exit(1)
        else:
            files.append(arg)
    for path in files or ["-"]:
        text = stdin if path == "-" else ctx.machine.read_file(path)
        if path != "-" and _is_dir(path):
            result.err(f"sha256sum: {path}: Is a directory\n").exit(1)
            continue
        if text is None:
            result.err(f"sha256sum: {path}: No such file or directory\n").exit(1)
            continue
        digest = hashlib.sha256(text.encode()).hexdigest()
        if "\\" in path or "\n" in path:
            shown = path.replace("\\", "\\\\").replace("\n", "\\n")
            result.out(f"\\{digest}  {shown}\n")
        else:
            result.out(f"{digest}  {path}\n")
    return result


def tee(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    append = False
    files: list[str] = []
    ended = False
    for arg in argv[1:]:
        if not ended and arg == "--":
            ended = True
        elif not ended and arg in ("-a", "--append"):
            append = True
        elif not ended and arg.startswith("-") and arg != "-":
            return result.err(
                f"tee: unrecognized option '{arg}'\nTry 'tee --help' for more information.\n"
            ).exit(1)
        else:
            files.append(arg)
    result.out(stdin)
    machine = ctx.machine
    for path in files:
        if path in ("/dev/null", "-"):
            continue
        if path in ("/dev/stdout", "/dev/stderr"):
            result.chunks.append((1 if path == "/dev/stdout" else 2, stdin))
            continue
        if _root_may_write(path):
            if not ctx.as_root:
                result.err(f"tee: {path}: Permission denied\n").exit(1)
                continue
            previous = machine.unit_files.get(path, "") if append else ""
            machine.write_file(path, previous + stdin)
            continue
        result.err(f"tee: {path}: Permission denied\n").exit(1)
    return result
