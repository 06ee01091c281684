"""One shell invocation on a host: who runs it, where its output goes, its stdin and $VARS."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..processes import Login
    from ..state import Machine
    from ..state.gpus import GpuReading

OUT, ERR, NULL = "out", "err", "null"


class Sink:
    """Where a session's output goes: collected here, or streamed by a subclass."""

    def __init__(self) -> None:
        self.stdout: list[str] = []
        self.stderr: list[str] = []

    def write(self, stream: str, text: str) -> None:
        (self.stdout if stream == OUT else self.stderr).append(text)

    def flush(self) -> None:
        """Deliver what was written so far (nothing to do when collecting)."""


@dataclass
class Session:
    """One shell invocation on a host, as one SSH exec request runs it."""

    machine: Machine
    username: str = "root"
    sink: Sink = field(default_factory=Sink)
    read_stdin: Callable[[], Awaitable[str]] | None = None
    on_fault_change: Callable[[str, bool], None] | None = None
    login: Login | None = None  # logind's session, made when something first looks at it
    _stdin_used: bool = False
    # The GPUs' readings, shared by the script's nvidia-smi calls until something else may have
    # changed them (the shell forgets them: shell.runner.READS_ONLY). A probe asks nvidia-smi
    # seven times in a few milliseconds; computing eight GPUs' readings each time was a sixth
    # of the simulator's CPU per probe (bench/README.md).
    _gpu_readings: list[GpuReading] | None = field(default=None, repr=False)

    @property
    def is_root(self) -> bool:
        return self.username == "root"

    def ensure_login(self) -> Login:
        if self.login is None:
            self.login = self.machine.new_login(self.username)
        return self.login

    def gpu_readings(self) -> list[GpuReading]:
        if self._gpu_readings is None:
            self._gpu_readings = self.machine.gpu_readings()
        return self._gpu_readings

    def forget_gpu_readings(self) -> None:
        self._gpu_readings = None

    async def stdin(self) -> str:
        if self._stdin_used or self.read_stdin is None:
            return ""
        self._stdin_used = True
        return await self.read_stdin()

    def env(self, status: int) -> dict[str, str]:
        home = "/root" if self.is_root else f"/home/{self.username}"
        return {
            "?": str(status),
            "$": "4711",
            "HOME": home,
            "USER": self.username,
            "LOGNAME": self.username,
            "HOSTNAME": self.machine.name,
            "SHELL": "/bin/bash",
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        }
