"""`nvidia-smi topo -m`: how the GPUs (and NICs) of a two-socket host reach each other.

Two shapes, by the host's hardware profile (`topology`):

- "pcie": cards on PCIe, no NVLink (8 RTX PRO 6000 Blackwell Server Edition, 4 L40S). The
  first half of the GPUs hang off socket 0 and the rest off socket 1, each behind its own
  host bridge, so a pair within a socket is NODE and a pair across sockets is SYS. One
  ConnectX NIC per socket.
- "nvswitch": an HGX board (H100, H200): every pair of GPUs is NV18 through the NVSwitches
  (NV17 for a GPU with a link down), four NICs, each behind the PCIe switch of two GPUs (PXB).

A GPU that fell off the bus is left out, as nvidia-smi leaves it out.
"""

from __future__ import annotations

from collections.abc import Callable

from ..state.hardware import DEFAULT_HARDWARE, HardwareProfile

SOCKET_CPUS = ("0-47,96-143", "48-95,144-191")
NICS = ("mlx5_0", "mlx5_1")  # NIC<n> sits on socket n
HGX_SOCKET_CPUS = ("0-55,112-167", "56-111,168-223")
HGX_NICS = ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")  # NIC<n> behind GPU 2n's and 2n+1's switch

LEGEND = (
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
    "(e.g., QPI/UPI)\n"
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
    "within a NUMA node\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host "
    "Bridge)\n"
    "  PIX  = Connection traversing at most a single PCIe bridge\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n"
)

# One device: (label, socket, the PCIe switch it sits behind (-1: its own host bridge)).
_Device = tuple[str, int, int]


def socket_of_gpu(index: int, count: int = DEFAULT_HARDWARE.gpu_count) -> int:
    return 0 if index < count // 2 else 1


def _pcie_link(a: _Device, b: _Device) -> str:
    if a == b:
        return " X "
    if a[2] >= 0 and a[2] == b[2]:
        return "PXB"
    return "NODE" if a[1] == b[1] else "SYS"


def topology_matrix(
    hardware: HardwareProfile = DEFAULT_HARDWARE,
    gpus: list[int] | None = None,
    links: Callable[[int], int] | None = None,
) -> str:
    """The matrix, legend and NIC legend, tab-separated as nvidia-smi prints them (GPU rows
    end in CPU affinity, NUMA affinity, an empty cell and the GPU NUMA ID). `links(i)` is how
    many of GPU i's NVLinks are up (all of them when not given)."""
    count = hardware.gpu_count
    shown = list(range(count)) if gpus is None else gpus
    hgx = hardware.topology == "nvswitch"
    cpus, nics = (HGX_SOCKET_CPUS, HGX_NICS) if hgx else (SOCKET_CPUS, NICS)
    up = links or (lambda _index: hardware.nvlink_links)
    devices: list[_Device] = [
        (f"GPU{i}", socket_of_gpu(i, count), i * len(nics) // count if hgx else -1) for i in shown
    ]
    devices += [(f"NIC{n}", n * 2 // len(nics), n if hgx else -1) for n in range(len(nics))]

    def cell(a: _Device, b: _Device) -> str:
        if hgx and a != b and a[0].startswith("GPU") and b[0].startswith("GPU"):
            return f"NV{min(up(int(a[0][3:])), up(int(b[0][3:])))}"
        return _pcie_link(a, b)

    header = "".join(f"\t{label}" for label, _, _ in devices)
    lines = [f"{header}\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for device in devices:
        cells = "\t".join(cell(device, other) for other in devices)
        label, socket = device[0], device[1]
        if label.startswith("GPU"):
            lines.append(f"{label}\t{cells}\t{cpus[socket]}\t{socket}\t\tN/A")
        else:
            lines.append(f"{label}\t{cells}\t\t\t\t")
    nic_legend = "".join(f"  NIC{n}: {name}\n" for n, name in enumerate(nics))
    return "\n".join(lines) + "\n\n" + LEGEND + "\nNIC Legend:\n\n" + nic_legend + "\n"
