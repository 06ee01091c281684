"""nvidia-smi's CSV queries: GPUs and the processes on them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..commands import GPU_FIELDS
from ..state import (
    ComputeApp,
    GpuState,
)
from .common import (
    DIGITS_RE,
    ParseError,
    excerpt,
    first_line,
    is_unavailable,
    read_number,
)

# --- nvidia-smi ----------------------------------------------------------------------------

# Whole-command failures: the first line is the message worth showing.
_SMI_FATAL_PREFIXES = (
    "NVIDIA-SMI has failed",
    "Failed to initialize NVML",
    "NVML Shared Library Not Found",
)
_SMI_MISSING_SUFFIXES = (
    "nvidia-smi: command not found",
    "nvidia-smi: not found",
    "nvidia-smi: No such file or directory",
)
# One GPU that fell off the bus; the others are still listed.
_SMI_ROW_ERROR_PREFIX = "Unable to determine the device handle"
_NO_DEVICES = "No devices were found"
_NO_PROCESSES = "No running processes found"

# field name -> (GpuState attribute, kind, unit nvidia-smi prints for it)
_GPU_COLUMNS: dict[str, tuple[str, str, str | None]] = {
    "index": ("index", "int", None),
    "uuid": ("uuid", "str", None),
    "gpu_uuid": ("uuid", "str", None),
    "name": ("name", "str", None),
    "gpu_name": ("name", "str", None),
    "memory.used": ("memory_used_mib", "int", "MiB"),
    "memory.total": ("memory_total_mib", "int", "MiB"),
    "power.draw": ("power_draw_w", "float", "W"),
    "power.limit": ("power_limit_w", "float", "W"),
    "enforced.power.limit": ("power_limit_w", "float", "W"),
    "utilization.gpu": ("utilization_pct", "int", "%"),
    "temperature.gpu": ("temperature_c", "int", "C"),
}


def _smi_fatal(text: str) -> str | None:
    line = first_line(text)
    fatal = line.startswith(_SMI_FATAL_PREFIXES) or line.endswith(_SMI_MISSING_SUFFIXES)
    return line if fatal else None


def _smi_rows(
    text: str, parse_row: Callable[[str, int], Any], problems: list[str] | None
) -> list[Any]:
    """Shared line loop of the two nvidia-smi parsers (see `parse_gpu_csv`)."""
    fatal = _smi_fatal(text)
    if fatal:
        raise ParseError(fatal)
    rows: list[Any] = []
    bad: list[str] = []
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith(_SMI_ROW_ERROR_PREFIX):
            bad.append(f"line {number}: {excerpt(line)}")
            continue
        try:
            rows.append(parse_row(line, len(rows)))
        except ParseError as exc:
            bad.append(f"line {number}: {exc}")
    if bad and (problems is None or not rows):
        raise ParseError(bad[0] if len(bad) == 1 else f"{bad[0]} (and {len(bad) - 1} more)")
    if problems is not None:
        problems.extend(bad)
    return rows


def parse_gpu_csv(
    text: str, fields: Sequence[str] = GPU_FIELDS, *, problems: list[str] | None = None
) -> list[GpuState]:
    """Rows of `nvidia-smi --query-gpu=<fields> --format=csv,noheader[,nounits]`.

    Driver failures raise ParseError with nvidia-smi's own first line. A bad row (wrong column
    count, a GPU that fell off the bus) raises too, unless `problems` is given: then the row is
    skipped and described there, so seven good GPUs are not lost to one bad one. `No devices
    were found` is a valid answer: no GPUs. Empty output is not: nvidia-smi always says something.
    """
    if not text.strip():
        raise ParseError("nvidia-smi printed nothing")
    if first_line(text) == _NO_DEVICES and len(text.strip().splitlines()) == 1:
        return []
    columns = list(fields)

    def row(line: str, position: int) -> GpuState:
        values = [v.strip() for v in line.split(",")]
        if values[0] == columns[0]:
            raise ParseError("unexpected header line (use --format=csv,noheader)")
        if len(values) != len(columns):
            shown = excerpt(line, 120)
            raise ParseError(f"expected {len(columns)} columns, got {len(values)}: {shown!r}")
        attrs: dict[str, Any] = {}
        for column, value in zip(columns, values, strict=True):
            if column not in _GPU_COLUMNS:
                continue
            attr, kind, unit = _GPU_COLUMNS[column]
            if kind == "str":
                attrs[attr] = None if is_unavailable(value) else value
            else:
                number = read_number(value, unit)
                attrs[attr] = number if number is None or kind == "float" else round(number)
        if attrs.setdefault("index", position) is None:
            raise ParseError(f"GPU index unavailable: {excerpt(line, 120)!r}")
        return GpuState(**attrs)

    gpus: list[GpuState] = _smi_rows(text, row, problems)
    return gpus


def parse_compute_apps(text: str, *, problems: list[str] | None = None) -> list[ComputeApp]:
    """Rows of `nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid` (the
    order of commands.COMPUTE_APP_FIELDS; rows without the GPU's UUID are read too).

    Empty output, `No running processes found` and `No devices were found` mean no processes.
    A process name may contain commas, so the name is everything between the first column and
    the memory column. `problems` works as in `parse_gpu_csv`.
    """
    if text.strip() in {"", _NO_PROCESSES, _NO_DEVICES}:
        return []

    def row(line: str, position: int) -> ComputeApp:
        pid, _, rest = line.partition(",")
        uuid: str | None = None
        head, comma, last = rest.rpartition(",")
        before_last = head.rpartition(",")[2].strip()
        looks_like_memory = is_unavailable(before_last) or before_last.endswith("MiB")
        if "," in head and (
            last.strip().startswith("GPU-") or (is_unavailable(last.strip()) and looks_like_memory)
        ):  # the last column is the GPU's UUID, the one before it the memory
            uuid = None if is_unavailable(last.strip()) else last.strip()
            rest = head
        name, comma, memory = rest.rpartition(",")
        if not comma:
            raise ParseError(f"expected 4 columns: {excerpt(line, 120)!r}")
        if not DIGITS_RE.fullmatch(pid.strip()):
            raise ParseError(f"not a process id: {pid.strip()!r}")
        used = read_number(memory.strip(), "MiB")
        return ComputeApp(int(pid), name.strip(), None if used is None else round(used), uuid)

    apps: list[ComputeApp] = _smi_rows(text, row, problems)
    return apps
