"""journalctl: a unit's (or the whole host's) journal, in the short, cat or short-iso format."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from .interface import Context, Result
from .systemd import mangle_unit, short_line

_IGNORED = ("--no-pager", "-q", "--quiet", "-b", "--boot", "--no-hostname", "-x", "-a")
_OUTPUTS = ("short", "cat", "short-iso", "short-precise", "with-unit")


@dataclass
class _Options:
    units: list[str]
    count: int | None = None  # None: every line
    output: str = "short"
    reverse: bool = False


def journalctl(ctx: Context, argv: list[str], stdin: str) -> Result:
    options = _options(argv[1:])
    if isinstance(options, Result):
        return options
    result = Result()
    if options.output not in _OUTPUTS:
        return result.err(f"Unknown output format '{options.output}'.\n").exit(1)
    machine = ctx.machine
    entries = machine.journal_lines(options.units or None, options.count)
    if options.reverse:
        entries.reverse()
    if not entries:
        return result.out("-- No entries --\n")
    for entry in entries:
        if options.output == "cat":
            result.out(entry.message + "\n")
        elif options.output == "short-iso":
            stamp = dt.datetime.fromtimestamp(entry.wall, dt.UTC).strftime(
                "%Y-%m-%dT%H:%M:%S+00:00"
            )
            result.out(f"{stamp} {machine.name} {entry.ident}[{entry.pid}]: {entry.message}\n")
        else:
            result.out(short_line(machine, entry) + "\n")
    return result


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
