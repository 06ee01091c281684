"""The engine's installed files: what a patched file does, and what reinstalling undoes.

The `patched_file` fault is a modified file the integrity check reports and nothing more; the
`five_token_corruption` fault is a patched engine that also answers garbage to any prompt of
exactly five tokens (as `simulator.http.text` counts them), and reports the same file.
Reinstalling the package (`pip install --force-reinstall`) restores the files on disk, but an
engine process that was already running keeps the code it loaded: it goes on corrupting
five-token prompts until its unit restarts.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from . import catalog

if TYPE_CHECKING:
    from .state import Machine, Run

FILE_FAULTS = ("patched_file", "five_token_corruption")
PATCHED_FILE = "vllm/model_executor/layers/fused_moe/fused_moe.py"  # what both faults patch

# machine -> (pid, start) of runs still executing the patched code they loaded
_STALE: weakref.WeakKeyDictionary[Machine, set[tuple[int, float]]] = weakref.WeakKeyDictionary()


def corrupts_five_token_prompts(machine: Machine, run: Run) -> bool:
    engine = run.engine
    if engine is not None and machine.fault_applies("five_token_corruption", engine.model_path):
        return True
    return (run.pid, run.started_mono) in _STALE.get(machine, set())


def reinstall(machine: Machine) -> None:
    """Put the package's files back as its RECORD lists them."""
    machine.tick()
    if "five_token_corruption" in machine.faults:
        stale = _STALE.setdefault(machine, set())
        for unit in machine.units.values():
            run = unit.run
            engine = run.engine if run is not None else None
            # Loaded, or loading: either way it imported the patched module already.
            patched = engine is not None and machine.fault_applies(
                "five_token_corruption", engine.model_path
            )
            if run is not None and patched:
                stale.add((run.pid, run.started_mono))
    for fault in FILE_FAULTS:
        machine.set_fault(fault, False)
    machine.integrity_modified = []
    machine.integrity_missing = []
    machine.integrity_added = []


def integrity_report(machine: Machine, dist: str) -> dict[str, Any] | None:
    """What the integrity script prints for `dist` on the host's engine install."""
    known = {"vllm": ("vllm", catalog.VLLM_VERSION, 1873), "torch": ("torch", "2.9.0", 15734)}
    norm = dist.lower().replace("_", "-").replace(".", "-")
    if norm not in known:
        return None
    name, version, checked = known[norm]
    modified = list(machine.integrity_modified) if name == "vllm" else []
    patched = set(FILE_FAULTS) & machine.faults  # both patch a file
    if name == "vllm" and patched and PATCHED_FILE not in modified:
        modified.append(PATCHED_FILE)
    missing = list(machine.integrity_missing) if name == "vllm" else []
    added = list(machine.integrity_added) if name == "vllm" else []
    return {
        "dist": name,
        "version": version,
        "checked": checked,
        "modified": sorted(modified),
        "missing": sorted(missing),
        "added": sorted(added),
    }
