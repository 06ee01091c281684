"""What a simulated host is built of: its GPUs, their memory, links and limits, per profile.

Each host has one profile (`simfleet --hardware gpu-02=h100-sxm`); everything that reads a GPU's
size or name (the readings, the fit and OOM checks of a vLLM start, the topology, NVLink, row
remapping, MIG) reads it here. The default, `rtx-pro-6000`, is what every host was before
profiles: 8 x RTX PRO 6000 Blackwell Server Edition on PCIe Gen5, no NVLink.

The figures are nvidia-smi's for these boards (driver 580): names, memory totals in MiB, power
limits, the maximum SM and memory clocks, the PCIe link's generation and width. What a board
draws or clocks to under load is plausible, not measured.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

# The PCI buses of an 8-GPU HGX board's GPUs (a DGX H100 has these); an 8-way PCIe server's
# cards sit on the same buses in the simulator. A 4-GPU server has two cards per socket.
EIGHT_GPU_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)
FOUR_GPU_BUSES = (0x18, 0x3A, 0x9A, 0xBA)


@dataclass(frozen=True)
class HardwareProfile:
    """One kind of host: its GPUs as nvidia-smi reports them, and how they are joined."""

    key: str  # what --hardware names
    label: str  # the GPU's short name, for the login banner
    gpu_name: str  # nvidia-smi's name
    gpu_count: int
    memory_mib: int  # memory.total of each GPU
    power_limit_w: float
    clock_max_sm_mhz: int
    clock_max_mem_mhz: int
    pcie_gen_max: int
    pcie_width_max: int
    bus_ids: tuple[int, ...]  # each GPU's PCI bus, in index order
    memory_bandwidth: float  # bytes/s of one GPU, for the performance model
    nvlink_links: int = 0  # NVLinks per GPU (0: PCIe only)
    nvlink_gbps: float = 26.562  # per link, as `nvidia-smi nvlink -s` prints it
    ecc: bool = True  # ECC enabled (the ECC counters read [N/A] when it is not)
    memory_kind: str = "GDDR"  # "HBM" has a row remapper; GDDR boards report [N/A]
    mig_mode: str | None = "Disabled"  # mig.mode.current; None: the board has no MIG
    mig_devices: tuple[str, ...] = ()  # the MIG devices of each GPU when MIG is enabled
    topology: str = "pcie"  # "pcie": two sockets of host bridges; "nvswitch": NV# everywhere
    idle_power_w: tuple[float, float] = (82.0, 30.0)  # base, and the spread between boards
    load_power_w: tuple[float, float] = (330.0, 240.0)  # base, and what full load adds
    busy_sm_mhz: int = 2407  # SM clock under load
    held_sm_mhz: int = 1200  # SM clock idling with memory held
    idle_sm_mhz: int = 180
    idle_mem_mhz: int = 405

    @property
    def has_nvlink(self) -> bool:
        return self.nvlink_links > 0

    @property
    def row_remapping(self) -> bool:
        """Whether the board remaps rows (HBM; GDDR boards report [N/A])."""
        return self.memory_kind == "HBM"

    @property
    def mig_enabled(self) -> bool:
        return self.mig_mode == "Enabled"

    @property
    def interconnect(self) -> str:
        """What the performance model's all-reduce runs over (simulator.perf.INTERCONNECTS)."""
        return "nvlink" if self.has_nvlink else "pcie"

    def bus_id(self, index: int) -> str:
        """pci.bus_id: `00000000:5D:00.0` (an eight-digit domain)."""
        return f"00000000:{self.bus_ids[index % len(self.bus_ids)]:02X}:00.0"

    def describe(self) -> dict[str, object]:
        """The profile as plain data (`simctl status`)."""
        return {
            "profile": self.key,
            "gpu_name": self.gpu_name,
            "gpu_count": self.gpu_count,
            "memory_mib": self.memory_mib,
            "power_limit_w": self.power_limit_w,
            "pcie": f"Gen{self.pcie_gen_max} x{self.pcie_width_max}",
            "nvlink_links": self.nvlink_links,
            "ecc": self.ecc,
            "memory_kind": self.memory_kind,
            "mig_mode": self.mig_mode,
        }


RTX_PRO_6000 = HardwareProfile(
    key="rtx-pro-6000",
    label="RTX PRO 6000",
    gpu_name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
    gpu_count=8,
    memory_mib=97887,
    power_limit_w=600.0,
    clock_max_sm_mhz=3090,
    clock_max_mem_mhz=14001,  # GDDR7 at 28 Gbps, as nvidia-smi counts it
    pcie_gen_max=5,
    pcie_width_max=16,
    bus_ids=EIGHT_GPU_BUSES,
    memory_bandwidth=1.792e12,
)
H100_SXM = HardwareProfile(
    key="h100-sxm",
    label="H100 SXM",
    gpu_name="NVIDIA H100 80GB HBM3",
    gpu_count=8,
    memory_mib=81559,
    power_limit_w=700.0,
    clock_max_sm_mhz=1980,
    clock_max_mem_mhz=2619,
    pcie_gen_max=5,
    pcie_width_max=16,
    bus_ids=EIGHT_GPU_BUSES,
    memory_bandwidth=3.35e12,
    nvlink_links=18,
    memory_kind="HBM",
    topology="nvswitch",
    idle_power_w=(68.0, 12.0),
    load_power_w=(380.0, 280.0),
    busy_sm_mhz=1755,
    held_sm_mhz=1980,
    idle_sm_mhz=345,
    idle_mem_mhz=2619,  # HBM3 stays at its clock
)
H200 = replace(
    H100_SXM,
    key="h200",
    label="H200",
    gpu_name="NVIDIA H200",
    memory_mib=143771,
    clock_max_mem_mhz=3201,
    idle_mem_mhz=3201,
    memory_bandwidth=4.8e12,
    idle_power_w=(74.0, 12.0),
)
L40S = HardwareProfile(
    key="l40s",
    label="L40S",
    gpu_name="NVIDIA L40S",
    gpu_count=4,
    memory_mib=46068,
    power_limit_w=350.0,
    clock_max_sm_mhz=2520,
    clock_max_mem_mhz=9001,
    pcie_gen_max=4,
    pcie_width_max=16,
    bus_ids=FOUR_GPU_BUSES,
    memory_bandwidth=0.864e12,
    mig_mode=None,
    idle_power_w=(34.0, 8.0),
    load_power_w=(190.0, 140.0),
    busy_sm_mhz=2235,
    held_sm_mhz=1275,
    idle_sm_mhz=210,
)
H100_MIG = replace(
    H100_SXM,
    key="h100-mig",
    mig_mode="Enabled",
    mig_devices=("3g.40gb", "3g.40gb"),  # two halves of each GPU
)

PROFILES: dict[str, HardwareProfile] = {
    p.key: p for p in (RTX_PRO_6000, H100_SXM, H200, L40S, H100_MIG)
}
DEFAULT_HARDWARE = RTX_PRO_6000


def profile(key: str) -> HardwareProfile:
    """The profile `key` names (ValueError naming the known ones otherwise)."""
    try:
        return PROFILES[key]
    except KeyError:
        known = ", ".join(PROFILES)
        raise ValueError(f"unknown hardware profile {key!r}; known: {known}") from None


def mig_uuid(gpu_uuid: str, device: int) -> str:
    """A MIG device's UUID, stable per GPU and device: `MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxx...`."""
    h = hashlib.sha256(f"{gpu_uuid}:mig:{device}".encode()).hexdigest()
    return f"MIG-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
