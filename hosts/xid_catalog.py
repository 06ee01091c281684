"""What NVIDIA's Xid catalog calls each Xid an inference host meets, in a few words.

From NVIDIA's "Xid Errors" table (docs.nvidia.com/deploy/xid-errors), as people read it on the
host page; what each means for the verdict is in deployments.verdict_table.
"""

from __future__ import annotations

XID_NAMES: dict[int, str] = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "row remapping event",
    64: "row remapping failure",
    68: "video decoder exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained memory error",
    95: "uncontained memory error",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    136: "link training failed",
    140: "unrecovered ECC error",
    143: "GPU initialisation error",
    144: "NVLink SAW error",
    145: "NVLink RLW error",
    149: "NVLink NETIR error",
    150: "NVLink MSE error",
    154: "GPU recovery action changed",
    155: "NVLink software-defined error",
}


def xid_name(code: int) -> str:
    return XID_NAMES.get(code, "not in NVIDIA's table")
