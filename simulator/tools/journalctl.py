"""journalctl: a unit's journal, the kernel's (`-k`) or the whole host's, in the short, cat or
short-iso format; `--grep` filters messages, `-n` keeps the newest, `-q` keeps quiet about an
empty result. The host has booted once: `-b` (or `-b 0`) is every entry there is."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from ..state import kernel_log
from .interface import Context, Result
from .systemd import mangle_unit, short_line

_IGNORED = ("--no-pager", "--no-hostname", "-x", "-a")
_OUTPUTS = ("short", "cat", "short-iso", "short-precise", "with-unit")
_BOOT = re.compile(r"[+-]?\d+|[0-9a-f]{32}")  # an offset or a boot ID
_THIS_BOOT = {"0", "-0", "+0", "1", "+1"}  # the only boot: offset 0, or the first one


@dataclass
class _Options:
    units: list[str]
    count: int | None = None  # None: every line
    output: str = "short"
    reverse: bool = False
    kernel: bool = False
    quiet: bool = False
    grep: str | None = None
    case_sensitive: bool | None = None  # None: smart case (sensitive if it has upper case)
    boot: str | None = None  # the boot asked for (None: all of them)


def journalctl(ctx: Context, argv: list[str], stdin: str) -> Result:
    options = _options(argv[1:])
    if isinstance(options, Result):
        return options
    result = Result()
    if options.output not in _OUTPUTS:
        return result.err(f"Unknown output format '{options.output}'.\n").exit(1)
    if options.boot is not None and options.boot not in _THIS_BOOT:
        return result.err(
            f"Data from the specified boot ({options.boot}) is not available: "
            "No such boot ID in journal\n"
        ).exit(1)
    grep = _pattern(options)
    if isinstance(grep, Result):
        return grep
    machine = ctx.machine
    entries = machine.journal_lines(
        options.units or None, options.count, kernel=options.kernel, grep=grep
    )
    if options.reverse:
        entries.reverse()
    if not entries:
        return result if options.quiet else result.out("-- No entries --\n")
    for entry in entries:
        who = entry.ident if kernel_log.is_kernel(entry) else f"{entry.ident}[{entry.pid}]"
        if options.output == "cat":
            result.out(entry.message + "\n")
        elif options.output == "short-iso":
            stamp = dt.datetime.fromtimestamp(entry.wall, dt.UTC).strftime(
                "%Y-%m-%dT%H:%M:%S+00:00"
            )
            result.out(f"{stamp} {machine.name} {who}: {entry.message}\n")
        else:
            result.out(short_line(machine, entry) + "\n")
    return result


def _pattern(options: _Options) -> re.Pattern[str] | Result | None:
    """`--grep`'s pattern, case-insensitive unless it has upper case (journalctl's smart case)
    or `--case-sensitive` says otherwise."""
    if options.grep is None:
        return None
    sensitive = options.case_sensitive
    if sensitive is None:
        sensitive = any(c.isupper() for c in options.grep)
    try:
        return re.compile(options.grep, 0 if sensitive else re.IGNORECASE)
    except re.error as exc:
        return Result().err(f'Bad pattern "{options.grep}": {exc}\n').exit(1)


def _options(args: list[str]) -> _Options | Result:
    """What the command line asks for, or the error journalctl exits with."""
    options = _Options(units=[])
    i = 0
    while i < len(args):
        arg = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        if arg in ("-u", "--unit"):
            if nxt is None:
                return Result().err(f"journalctl: option '{arg}' requires an argument\n").exit(1)
            options.units.append(mangle_unit(nxt)[0])
            i += 1
        elif arg.startswith("--unit="):
            options.units.append(mangle_unit(arg.split("=", 1)[1])[0])
        elif arg.startswith("-u") and len(arg) > 2:
            options.units.append(mangle_unit(arg[2:])[0])
        elif arg in ("-n", "--lines"):
            options.count = 10
            if nxt is not None and nxt.lstrip("+").isdigit():
                options.count = int(nxt.lstrip("+"))
                i += 1
            elif nxt == "all":
                options.count = None
                i += 1
        elif arg.startswith("--lines=") or (arg.startswith("-n") and len(arg) > 2):
            value = arg.split("=", 1)[1] if arg.startswith("--lines=") else arg[2:]
            if value == "all":
                options.count = None
            elif value.lstrip("+").isdigit():
                options.count = int(value.lstrip("+"))
            else:
                return Result().err(f"Failed to parse lines '{value}'.\n").exit(1)
        elif arg in ("-o", "--output"):
            options.output = nxt or ""
            i += 1
        elif arg.startswith("--output="):
            options.output = arg.split("=", 1)[1]
        elif arg.startswith("-o") and len(arg) > 2:
            options.output = arg[2:]
        elif arg in ("-r", "--reverse"):
            options.reverse = True
        elif arg in ("-k", "--dmesg"):
            options.kernel = True  # implies -b, and there is one boot
        elif arg in ("-q", "--quiet"):
            options.quiet = True
        elif arg in ("-g", "--grep"):
            if nxt is None:
                return Result().err(f"journalctl: option '{arg}' requires an argument\n").exit(1)
            options.grep = nxt
            i += 1
        elif arg.startswith("--grep="):
            options.grep = arg.split("=", 1)[1]
        elif arg.startswith("-g") and len(arg) > 2:
            options.grep = arg[2:]
        elif arg == "--case-sensitive" or arg.startswith("--case-sensitive="):
            value = arg.partition("=")[2] or "yes"
            options.case_sensitive = value.lower() in ("1", "yes", "true", "on", "y", "t")
        elif arg in ("-b", "--boot"):
            # An optional argument: the next word, if it reads as a boot (journalctl's way).
            options.boot = "0"
            if nxt is not None and _BOOT.fullmatch(nxt):
                options.boot = nxt
                i += 1
        elif arg.startswith("--boot="):
            options.boot = arg.split("=", 1)[1]
        elif arg.startswith("-b") and len(arg) > 2:
            options.boot = arg[2:]
        elif arg in ("-f", "--follow"):
            return (
                Result()
                .err("journalctl: --follow is not available on this simulated host\n")
                .exit(1)
            )
        elif arg in _IGNORED:
            pass
        elif arg == "-e" or arg == "--pager-end":
            options.count = options.count if options.count is not None else 1000
        else:
            return Result().err(f"journalctl: unrecognized option '{arg}'\n").exit(1)
        i += 1
    return options
