"""Shell builtins and one-line programs: echo, true, false, hostname, whoami, date."""

from __future__ import annotations

import datetime as dt

from .interface import Context, Result


def echo(ctx: Context, argv: list[str], stdin: str) -> Result:
    args = argv[1:]
    newline, escapes = True, False
    while args and len(args[0]) > 1 and args[0][0] == "-" and set(args[0][1:]) <= set("neE"):
        newline = newline and "n" not in args[0]
        escapes = ("e" in args[0]) or (escapes and "E" not in args[0])
        args = args[1:]
    text = " ".join(args)
    if escapes:
        text = text.replace("\\n", "\n").replace("\\t", "\t").replace("\\\\", "\\")
    return Result().out(text + ("\n" if newline else ""))


def true(ctx: Context, argv: list[str], stdin: str) -> Result:
    return Result()


def false(ctx: Context, argv: list[str], stdin: str) -> Result:
    return Result(status=1)


def hostname(ctx: Context, argv: list[str], stdin: str) -> Result:
    return Result().out(ctx.machine.name + "\n")


def whoami(ctx: Context, argv: list[str], stdin: str) -> Result:
    return Result().out(("root" if ctx.as_root else ctx.session.username) + "\n")


def date(ctx: Context, argv: list[str], stdin: str) -> Result:
    """`date +%s` (the host's wall clock, skewed when its NTP stopped), else date's default."""
    now = ctx.machine.wall()
    if argv[1:] == ["+%s"]:
        return Result().out(f"{int(now)}\n")
    if len(argv) > 1:
        return Result(status=1).err(f"date: invalid date '{argv[1]}'\n")
    return Result().out(
        dt.datetime.fromtimestamp(now, dt.UTC).strftime("%a %b %d %H:%M:%S UTC %Y\n")
    )
