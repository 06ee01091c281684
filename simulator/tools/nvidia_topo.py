"""`nvidia-smi topo -m`: how the GPUs (and NICs) of a two-socket PCIe host reach each other.

Eight RTX PRO 6000 Blackwell Server Edition cards on PCIe, no NVLink: GPUs 0-3 hang off
socket 0 and GPUs 4-7 off socket 1, each behind its own host bridge, so a pair within a
socket is NODE and a pair across sockets is SYS. One ConnectX NIC per socket.
"""

from __future__ import annotations

from ..state import GPU_COUNT

SOCKET_CPUS = ("0-47,96-143", "48-95,144-191")
NICS = ("mlx5_0", "mlx5_1")  # NIC<n> sits on socket n

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


def socket_of_gpu(index: int) -> int:
    return 0 if index < GPU_COUNT // 2 else 1


def _link(a: tuple[str, int], b: tuple[str, int]) -> str:
    """Two devices, each (kind, socket): themselves X, same socket NODE, else SYS."""
    if a == b:
        return " X "
    return "NODE" if a[1] == b[1] else "SYS"


def topology_matrix(gpus: list[int] | None = None) -> str:
    """The matrix, legend and NIC legend, tab-separated as nvidia-smi prints them (GPU rows
    end in CPU affinity, NUMA affinity, an empty cell and the GPU NUMA ID)."""
    shown = list(range(GPU_COUNT)) if gpus is None else gpus
    devices = [(f"GPU{i}", (f"GPU{i}", socket_of_gpu(i))) for i in shown]
    devices += [(f"NIC{n}", (f"NIC{n}", n)) for n in range(len(NICS))]
    header = "".join(f"\t{label}" for label, _ in devices)
    lines = [f"{header}\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for label, device in devices:
        cells = "\t".join(_link(device, other) for _, other in devices)
        if label.startswith("GPU"):
            socket = device[1]
            lines.append(f"{label}\t{cells}\t{SOCKET_CPUS[socket]}\t{socket}\t\tN/A")
        else:
            lines.append(f"{label}\t{cells}\t\t\t\t")
    nic_legend = "".join(f"  NIC{n}: {name}\n" for n, name in enumerate(NICS))
    return "\n".join(lines) + "\n\n" + LEGEND + "\nNIC Legend:\n\n" + nic_legend + "\n"
