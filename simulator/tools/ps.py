"""ps: procps-ng's ps for `-e`/`-A` with `-o` columns from pid, unit and comm."""

from __future__ import annotations

import re

from .. import processes
from .interface import Context, Result

# procps-ng 4's column for each field the simulated ps knows: (header, width, right-aligned).
_PS_FIELDS = {
    "pid": ("PID", processes.PID_WIDTH, True),
    "unit": ("UNIT", processes.UNIT_WIDTH, False),
    "comm": ("COMMAND", processes.COMM_WIDTH, False),
    "ucmd": ("CMD", processes.COMM_WIDTH, False),
    "ucomm": ("COMMAND", processes.COMM_WIDTH, False),
}
PS_USAGE = (
    "\n"
    "Usage:\n"
    " ps [options]\n"
    "\n"
    " Try 'ps --help <simple|list|output|threads|misc|all>'\n"
    "  or 'ps --help <s|l|o|t|m|a>'\n"
    " for additional help text.\n"
    "\n"
    "For more details see ps(1).\n"
)


def _ps_error(message: str) -> Result:
    return Result().err(f"error: {message}\n{PS_USAGE}").exit(1)


def _ps_format(spec: str) -> list[tuple[str, str]] | str:
    """procps's format_parse: `pid=,unit=` is two columns with empty headers (an error: str)."""
    items = [item for item in re.split(r"[ ,\t\n]", spec)]
    if items and items[-1] == "" and len(items) > 1:
        items.pop()  # one trailing delimiter is allowed
    if not any(items):
        return "empty format list"
    if "" in items:
        return "improper format list"
    columns = []
    for item in items:
        name, eq, header = item.partition("=")
        if name not in _PS_FIELDS:
            return f'unknown user-defined format specifier "{name}"'
        columns.append((name, header if eq else _PS_FIELDS[name][0]))
    return columns


def ps(ctx: Context, argv: list[str], stdin: str) -> Result:
    """procps-ng's ps for `-e`/`-A` with `-o` columns from pid, unit and comm."""
    options = _options(argv[1:])
    if isinstance(options, Result):
        return options
    every, specs = options
    if not every or not specs:
        # The real ps has a default selection and format; the simulated host only has these.
        return _ps_error("this simulated ps supports only -e (or -A) with -o pid,unit,comm")
    columns: list[tuple[str, str]] = []
    for spec in specs:
        parsed = _ps_format(spec)
        if isinstance(parsed, str):
            return _ps_error(parsed)
        columns += parsed
    login = ctx.session.ensure_login()
    table = ctx.machine.processes(login, own_pid=ctx.machine.take_pid())
    rows: list[list[str]] = [[h for _n, h in columns]] if any(h for _n, h in columns) else []
    for proc in table:
        values = {"pid": str(proc.pid), "unit": proc.unit or "-"}
        values["comm"] = values["ucmd"] = values["ucomm"] = proc.comm
        rows.append([values[name] for name, _h in columns])
    return _print(columns, rows)


def _options(args: list[str]) -> tuple[bool, list[str]] | Result:
    """Whether every process is asked for (-e, -A), and the -o/--format specs; or the error."""
    every = False
    specs: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name != "--format":
                return _ps_error("unknown gnu long option")
            if not eq:
                if i + 1 >= len(args):
                    return _ps_error("format specification must follow --format")
                i += 1
                value = args[i]
            specs.append(value)
        elif arg.startswith("-") and len(arg) > 1:
            j = 1
            while j < len(arg):
                flag = arg[j]
                if flag in "eA":
                    every = True
                elif flag == "o":
                    value = arg[j + 1 :]
                    if not value:
                        if i + 1 >= len(args):
                            return _ps_error("format specification must follow -o")
                        i += 1
                        value = args[i]
                    specs.append(value)
                    break
                else:
                    return _ps_error("unsupported SysV option")
                j += 1
        else:
            return _ps_error("unsupported option (BSD syntax)")
        i += 1
    return every, specs


def _print(columns: list[tuple[str, str]], rows: list[list[str]]) -> Result:
    """The rows in procps's column widths: numbers to the right, the last column unpadded."""
    last = len(columns) - 1
    layout = []  # per column: its width, and "r" (right), "l" (left) or "" (as is)
    for n, (name, header) in enumerate(columns):
        _default, width, right = _PS_FIELDS[name]
        layout.append((max(width, len(header)), "r" if right else ("" if n == last else "l")))
    lines = []
    for row in rows:
        cells = []
        for (width, align), value in zip(layout, row, strict=True):
            if align == "r":
                cells.append(value.rjust(width))
            elif align == "l":
                cells.append(value.ljust(width))
            else:
                cells.append(value)  # the last column is not padded
        lines.append(" ".join(cells) + "\n")
    return Result().out("".join(lines))
