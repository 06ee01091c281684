"""The GPU faults a probe reads, as plain data: memory errors that outlive the driver's load,
NVLink links and their error counters, the kernel's Xid events and GPUs nvidia-smi lost.

Each is what the host's own tool printed, parsed; what a fact means for the host's verdict is
decided in deployments.verdict_table, not here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


@dataclass
class GpuErrors:
    """One GPU's memory health beyond the volatile ECC counts (`gpu_errors`, `remapped_rows`).

    None where the GPU has no such counter (`[N/A]`): page retirement before Ampere, row
    remapping on Ampere and later with HBM, neither with ECC off.
    """

    index: int
    pci_bus_id: str | None = None  # "00000000:5D:00.0", as nvidia-smi prints it
    uuid: str | None = None
    ecc_uncorrected_aggregate: int | None = None  # over the board's life, across reboots
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None  # a row waits for a GPU reset to be remapped
    remap_failure: bool | None = None  # no spare row was left: the memory is bad
    mig_mode: bool | None = None  # MIG partitioning on (None: the GPU has no MIG)


@dataclass(slots=True)  # a worker keeps 18 per GPU of each host it probes (hosts.parsers.reuse)
class NvLink:
    link: int
    active: bool = True
    speed_gbps: float | None = None  # per direction, as `nvidia-smi nvlink -s` prints it
    replay_errors: int | None = None
    recovery_errors: int | None = None
    crc_errors: int | None = None

    @property
    def errors(self) -> int:
        return (self.replay_errors or 0) + (self.recovery_errors or 0) + (self.crc_errors or 0)


@dataclass(slots=True)
class GpuNvLinks:
    """The NVLinks of one GPU (`nvlink_status`, `nvlink_errors`)."""

    index: int
    uuid: str | None = None
    links: list[NvLink] = field(default_factory=list)

    @property
    def inactive(self) -> list[int]:
        return [link.link for link in self.links if not link.active]

    @property
    def errors(self) -> int:
        return sum(link.errors for link in self.links)


@dataclass
class XidEvent:
    """One `NVRM: Xid (PCI:0000:5d:00): 79, ...` line of the kernel log."""

    code: int
    pci: str  # "0000:5d:00": domain, bus and device, as the kernel names the GPU
    message: str  # what follows the code, e.g. "pid=0, GPU has fallen off the bus."
    at: str | None = None  # the journal's ISO time
    gpu_index: int | None = None  # matched through the GPUs' PCI bus ids; None: unknown


@dataclass
class LostGpu:
    """A GPU nvidia-smi could not reach: `Unable to determine the device handle for GPU...:
    GPU is lost`, or a row of `[GPU is lost]`, `[Unknown Error]` or `ERR!` values."""

    message: str
    pci_bus_id: str | None = None
    index: int | None = None


class DiagnosticResult(StrEnum):
    """What DCGM said of a test, in its words (lower case), best first."""

    SKIP = "skip"
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass
class DiagnosticTest:
    """One test of DCGM's diagnostic, as it judged it on the GPUs it ran on."""

    category: str  # Deployment, Integration, Hardware, Stress
    name: str  # e.g. "Page Retirement/Row Remap", "memory"
    status: str  # a DiagnosticResult
    gpus: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class GpuDiagnostic:
    """`dcgmi diag -r <level> -j` on an operator's request. `error`: it did not run (DCGM not
    installed, its host engine down, a MIG host); then there are no tests."""

    level: int | None = None
    version: str | None = None
    tests: list[DiagnosticTest] = field(default_factory=list)
    error: str | None = None

    @property
    def failed(self) -> list[DiagnosticTest]:
        return [t for t in self.tests if t.status == DiagnosticResult.FAIL]

    @property
    def warned(self) -> list[DiagnosticTest]:
        return [t for t in self.tests if t.status == DiagnosticResult.WARN]
