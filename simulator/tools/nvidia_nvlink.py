"""`nvidia-smi nvlink -s` (each link's speed) and `nvidia-smi nvlink -e` (its error counters).

For each GPU with NVLink, a `GPU <i>: <name> (UUID: <uuid>)` line, then one line per link
(`-s`) or three (`-e`), each starting with a tab and a space as nvidia-smi indents them. A
board without NVLink prints nothing at all and exits 0; a GPU that fell off the bus is left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..state import gpu_faults
from .interface import Result

if TYPE_CHECKING:
    from ..shell.session import Session

INVALID = "\nInvalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n"


def nvlink(session: Session, args: list[str]) -> Result:
    """`nvidia-smi nvlink` with `-s`/`--status` or `-e`/`--errorcounters` (and `-i N`)."""
    machine = session.machine
    mode: str | None = None
    ids: set[int] | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-s", "--status", "-e", "--errorcounters"):
            mode = "status" if arg in ("-s", "--status") else "errors"
        elif arg in ("-i", "--id") and i + 1 < len(args):
            try:
                ids = {int(v) for v in args[i + 1].split(",")}
            except ValueError:
                return Result().out(f"Invalid GPU ID: {args[i + 1]}\n").exit(2)
            i += 1
        else:
            return Result().out(INVALID).exit(2)
        i += 1
    if mode is None:
        return Result().out(INVALID).exit(2)
    result = Result()
    if not machine.hardware.has_nvlink:
        return result
    readings = session.gpu_readings()
    now = machine.clock()
    for r in readings:
        if r.lost or (ids is not None and r.index not in ids):
            continue
        result.out(f"GPU {r.index}: {r.name} (UUID: {r.uuid})\n")
        for link in gpu_faults.nvlinks(machine, r.index, now):
            k = link.link
            if mode == "status":
                speed = f"{machine.hardware.nvlink_gbps:g} GB/s" if link.active else "<inactive>"
                result.out(f"\t Link {k}: {speed}\n")
            else:
                result.out(
                    f"\t Link {k}: Replay Errors: {link.replay}\n"
                    f"\t Link {k}: Recovery Errors: {link.recovery}\n"
                    f"\t Link {k}: CRC Errors: {link.crc}\n"
                )
    return result
