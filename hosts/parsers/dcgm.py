"""DCGM's diagnostic as `dcgmi diag -r <level> -j` prints it: the JSON of DCGM up to 3.x
(`DCGM GPU Diagnostic`, results per `gpu_ids`) and of DCGM 4 (`DCGM Diagnostic`, results per
`entity_id`). Pure; what it means for the verdict is deployments.verdict_table's."""

from __future__ import annotations

import json
from typing import Any

from ..state_gpu import DiagnosticResult, DiagnosticTest, GpuDiagnostic
from .common import excerpt, first_line

# A test's status over its GPUs is its worst one.
_RANK = {result.value: rank for rank, result in enumerate(DiagnosticResult)}
_NOT_INSTALLED = ("dcgmi: command not found", "dcgmi: not found", "No such file or directory")


def parse_gpu_diagnostic(text: str, level: int | None) -> GpuDiagnostic:
    """Never raises: an answer that is not the diagnostic's JSON is its `error`."""
    stripped = text.strip()
    if not stripped:
        return GpuDiagnostic(level=level, error="dcgmi printed nothing")
    if any(marker in first_line(text) for marker in _NOT_INSTALLED):
        return GpuDiagnostic(level=level, error="DCGM is not installed on this host (no dcgmi)")
    start = stripped.find("{")
    try:
        data = json.loads(stripped[start:]) if start >= 0 else None
    except ValueError:
        data = None
    body = _body(data)
    if body is None:
        return GpuDiagnostic(level=level, error=excerpt(first_line(text), 200) or "not JSON")
    runtime = body.get("runtime_error")
    if isinstance(runtime, str) and runtime:
        return GpuDiagnostic(level=level, error=excerpt(runtime, 200))
    assert isinstance(data, dict)  # _body found the diagnostic in it
    metadata = data.get("metadata")
    version = body.get("version") or (
        metadata.get("version") if isinstance(metadata, dict) else None
    )
    tests = [
        test
        for category in _list(body.get("test_categories"))
        for test in (_test(category, raw) for raw in _list(category.get("tests")))
        if test is not None
    ]
    error = None if tests else "the diagnostic reported no tests"
    return GpuDiagnostic(
        level=level, version=str(version) if version else None, tests=tests, error=error
    )


def _body(data: Any) -> dict[str, Any] | None:
    if not isinstance(data, dict):
        return None
    for key in ("DCGM Diagnostic", "DCGM GPU Diagnostic"):
        if isinstance(data.get(key), dict):
            body: dict[str, Any] = data[key]
            return body
    return None


def _list(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _gpus(result: dict[str, Any]) -> list[int]:
    if isinstance(result.get("entity_id"), int):
        group = str(result.get("entity_group", "GPU")).upper()
        return [result["entity_id"]] if group == "GPU" else []
    ids = str(result.get("gpu_ids", result.get("gpu_id", "")))
    return [int(i) for i in ids.split(",") if i.strip().isdigit()]


def _test(category: dict[str, Any], raw: dict[str, Any]) -> DiagnosticTest | None:
    name = raw.get("name")
    if not isinstance(name, str):
        return None
    results = _list(raw.get("results"))
    statuses = [str(r.get("status", "")).lower() for r in results]
    summary = raw.get("test_summary")
    if isinstance(summary, dict) and not statuses:
        statuses = [str(summary.get("status", "")).lower()]
    known = [s for s in statuses if s in _RANK]
    if not known:
        return None
    worst = max(known, key=_RANK.__getitem__)
    gpus = sorted(
        {g for r, s in zip(results, statuses, strict=False) if s == worst for g in _gpus(r)}
    )
    warnings = [
        excerpt(str(w.get("warning", "")), 200)
        for r in results
        for w in _list(r.get("warnings"))
        if w.get("warning")
    ]
    return DiagnosticTest(
        category=str(category.get("category", "")),
        name=name,
        status=DiagnosticResult(worst).value,
        gpus=gpus,
        warnings=warnings[:4],
    )
