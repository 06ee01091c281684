"""One simulated host in-process, on a clock the test moves: the tools run as SSH would run them.

`host("h100-sxm")` boots a Machine of that hardware profile; `host.run("nvidia-smi -L")` is
(stdout, stderr, exit status); `host.advance(60)` moves its clock a simulated minute.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass, field

from simulator import catalog, shell
from simulator.state import Machine
from simulator.state.hardware import profile

MONO, WALL = 1000.0, 1_790_000_000.0  # the wall clock starts at 2026-09-21T14:13:20+00:00
QWEN = "/models/Qwen/Qwen3-235B-A22B-FP8"  # 220 GiB: fits eight 80 GB GPUs too
# The probe's read of the kernel log (hosts.commands.kernel_xids).
XIDS = "journalctl -k -b -q --no-pager -o short-iso -n 50 --grep 'NVRM: Xid'"


@dataclass
class Host:
    machine: Machine
    clock: list[float] = field(default_factory=lambda: [MONO])

    def run(self, command: str, username: str = "root") -> tuple[str, str, int]:
        sink = shell.Sink()
        session = shell.Session(self.machine, username=username, sink=sink)
        status = asyncio.run(shell.run(session, command))
        return "".join(sink.stdout), "".join(sink.stderr), status

    def out(self, command: str) -> list[str]:
        """The lines a command printed on stdout (it must exit 0 and print no error)."""
        stdout, stderr, status = self.run(command)
        assert (status, stderr) == (0, ""), (command, status, stderr)
        return stdout.splitlines()

    def advance(self, seconds: float) -> None:
        self.clock[0] += seconds

    def serve(self, model_path: str = QWEN, tensor_parallel_size: int = 8) -> None:
        """The default unit restarted on another model, and loaded (a second later)."""
        machine = self.machine
        text = catalog.unit_file_text(
            model_path=model_path, tensor_parallel_size=tensor_parallel_size
        )
        machine.write_file(machine.unit_path(catalog.DEFAULT_UNIT), text)
        machine.daemon_reload()
        unit = machine.lookup_unit(catalog.DEFAULT_UNIT)
        assert unit is not None
        machine.restart(unit)
        self.advance(1.0)
        assert machine.snapshot()["units"][catalog.DEFAULT_UNIT]["phase"] == "ready"


def host(hardware: str = "rtx-pro-6000", name: str = "gpu-01", **kwargs: object) -> Host:
    clock = [MONO]
    machine = Machine(
        name,
        clock=lambda: clock[0],
        wall=lambda: WALL + clock[0] - MONO,
        load_seconds=0.2,
        hardware=profile(hardware),
        **kwargs,  # type: ignore[arg-type]
    )
    return Host(machine, clock)


def stamp(after: float = 0.0) -> str:
    """short-iso's timestamp `after` seconds into the test."""
    return dt.datetime.fromtimestamp(WALL + after, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")


def kernel(message: str, after: float = 0.0) -> str:
    """A kernel message as `journalctl -k -o short-iso` prints it."""
    return f"{stamp(after)} gpu-01 kernel: {message}"
