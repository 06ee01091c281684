"""simctl: the simulator's own switchboard (faults, load, requests in flight), for demos."""

from __future__ import annotations

import json

from ..state import FAULTS
from .interface import Context, Result

SIMCTL_USAGE = (
    "usage: simctl status\n"
    "       simctl fault NAME on|off      (faults: " + ", ".join(FAULTS) + ")\n"
    "       simctl inflight RUNNING [WAITING]\n"
    "       simctl load-seconds SECONDS\n"
)


def simctl(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    machine = ctx.machine
    args = argv[1:]
    if not args or args[0] in ("-h", "--help", "help"):
        return result.out(SIMCTL_USAGE).exit(0 if args else 2)
    verb = args[0]
    if verb == "status" and len(args) == 1:
        return result.out(json.dumps(machine.snapshot(), indent=2) + "\n")
    if verb == "faults" and len(args) == 1:
        for fault in FAULTS:
            result.out(f"{fault}: {'on' if fault in machine.faults else 'off'}\n")
        return result
    if verb == "fault" and len(args) == 3 and args[2] in ("on", "off"):
        fault, on = args[1], args[2] == "on"
        if fault not in FAULTS:
            return result.err(f"simctl: unknown fault {fault!r}\n{SIMCTL_USAGE}").exit(2)
        machine.set_fault(fault, on)
        if ctx.session.on_fault_change is not None:
            ctx.session.on_fault_change(fault, on)
        return result.out(f"{machine.name}: fault {fault} {'on' if on else 'off'}\n")
    if verb == "inflight" and len(args) in (2, 3):
        try:
            running, waiting = int(args[1]), int(args[2]) if len(args) == 3 else 0
        except ValueError:
            return result.err(SIMCTL_USAGE).exit(2)
        machine.set_inflight(running, waiting)
        return result.out(f"{machine.name}: running {running}, waiting {waiting}\n")
    if verb == "load-seconds" and len(args) == 2:
        try:
            machine.load_seconds = max(0.0, float(args[1]))
        except ValueError:
            return result.err(SIMCTL_USAGE).exit(2)
        return result.out(f"{machine.name}: load takes {machine.load_seconds:g} s\n")
    return result.err(SIMCTL_USAGE).exit(2)
