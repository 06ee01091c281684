"""dcgmi: DCGM's diagnostic (`dcgmi diag -r 1|2 [-j]`) on the data-center boards (HBM: H100,
H200), in DCGM 3's JSON (`DCGM GPU Diagnostic`, results per `gpu_ids`, statuses in capitals).
Level 1 runs the deployment checks, level 2 adds PCIe and memory. The GPU faults show where DCGM
would see them: a pending or failed row remap in "Page Retirement/Row Remap", an uncorrectable
ECC error in the memory test, persistence off in "Persistence Mode"; a GPU off the bus fails
the NVML check. A MIG host refuses, as DCGM does; the GDDR boards have no DCGM installed."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..state.gpu_faults import faulted_gpu, hits
from .interface import Context, Result

if TYPE_CHECKING:
    from ..state import Machine

DCGM_VERSION = "3.3.9"
DEPLOYMENT = (
    "Denylist",
    "NVML Library",
    "CUDA Main Library",
    "Permissions and OS-related Blocks",
    "Persistence Mode",
    "Environmental Variables",
    "Page Retirement/Row Remap",
    "Graphics Processes",
    "Inforom",
)
USAGE = "Usage: dcgmi diag -r <1|2> [-j]\n"


def dcgmi(ctx: Context, argv: list[str], stdin: str) -> Result:
    result = Result()
    machine = ctx.machine
    if machine.hardware.memory_kind != "HBM":
        return result.err(f"bash: line 1: {argv[0]}: command not found\n").exit(127)
    args = argv[1:]
    if len(args) < 3 or args[0] != "diag" or args[1] != "-r" or args[2] not in ("1", "2"):
        return result.err(USAGE).exit(2)
    if machine.hardware.mig_mode == "Enabled":
        return result.out(
            "Error: Diagnostic could not be run: the GPUs are in MIG mode, which the "
            "diagnostic does not support.\n"
        ).exit(226)
    body = _diagnostic(machine, int(args[2]))
    failed = any(r["status"] == "FAIL" for c in body for t in c["tests"] for r in t["results"])
    text = json.dumps({"DCGM GPU Diagnostic": {"test_categories": body, "version": DCGM_VERSION}})
    return result.out(text + "\n").exit(226 if failed else 0)


def _diagnostic(machine: Machine, level: int) -> list[dict[str, Any]]:
    gpus = list(range(machine.hardware.gpu_count))
    lost = [i for i in gpus if hits(machine, "gpu_fell_off_bus", i)]
    remap = [
        i
        for i in gpus
        if hits(machine, "row_remap_pending", i) or hits(machine, "row_remap_failure", i)
    ]
    every = ",".join(str(i) for i in gpus)

    def check(name: str) -> dict[str, Any]:
        if name == "NVML Library" and lost:
            return _failing(name, every, lost, "GPU {} is lost: it fell off the bus")
        if name == "Page Retirement/Row Remap" and remap:
            return _failing(name, every, remap, "GPU {} has pending or failed row remappings")
        if name == "Persistence Mode" and "persistence_off" in machine.faults:
            warning = "Persistence mode for GPU {} is disabled. Enable persistence mode"
            return {
                "name": name,
                "results": [_result(str(i), "WARN", warning.format(i)) for i in gpus],
            }
        return {"name": name, "results": [{"gpu_ids": every, "status": "PASS"}]}

    categories: list[dict[str, Any]] = [
        {"category": "Deployment", "tests": [check(name) for name in DEPLOYMENT]}
    ]
    if level >= 2:
        ecc = (
            faulted_gpu(machine, "ecc_uncorrectable")
            if "ecc_uncorrectable" in machine.faults
            else None
        )
        memory = [
            _result(str(i), "FAIL", f"ecc_dbe_volatile_total on GPU {i}: 2 double-bit errors")
            if i == ecc
            else {"gpu_ids": str(i), "status": "PASS"}
            for i in gpus
        ]
        categories.append(
            {
                "category": "Integration",
                "tests": [
                    {
                        "name": "pcie",
                        "results": [{"gpu_ids": str(i), "status": "PASS"} for i in gpus],
                    }
                ],
            }
        )
        categories.append(
            {"category": "Hardware", "tests": [{"name": "memory", "results": memory}]}
        )
    return categories


def _failing(name: str, every: str, bad: list[int], warning: str) -> dict[str, Any]:
    good = ",".join(str(i) for i in range(64) if str(i) in every.split(",") and i not in bad)
    results = [_result(str(i), "FAIL", warning.format(i)) for i in bad]
    if good:
        results.insert(0, {"gpu_ids": good, "status": "PASS"})
    return {"name": name, "results": results}


def _result(gpu_ids: str, status: str, warning: str) -> dict[str, Any]:
    return {
        "gpu_ids": gpu_ids,
        "status": status,
        "warnings": [{"warning": warning, "error_id": 0, "error_category": 0, "error_severity": 1}],
    }
