"""What an engine repair rests on, read from a snapshot: the integrity check of a unit's engine,
what a repair would reinstall (approvals bind to it) and how the files differ. Pure; the
reinstall itself is a job step (deployments.execution.repair)."""

from __future__ import annotations

from typing import Any

from hosts.state import HostState, IntegrityReport


def integrity_report(state: HostState, unit: str) -> IntegrityReport | None:
    """The engine integrity check a snapshot holds for `unit`'s engine, if it ran one."""
    dep = state.deployments.get(unit)
    return dep.integrity if dep is not None else None


def package_of(report: IntegrityReport, source: str) -> dict[str, Any]:
    """What a repair reinstalls, as stored in the change (approvals bind to it)."""
    return {"dist": report.dist, "version": report.version, "source": source}


def differences(report: IntegrityReport) -> str:
    parts = [
        f"{len(files)} {label} ({', '.join(files[:3])})"
        for label, files in (
            ("modified", report.modified),
            ("missing", report.missing),
            ("added", report.added),
        )
        if files
    ]
    return "; ".join(parts) or "no difference"
