"""Parsers for the output of the probe script (hosts/commands.py): text in, dataclasses out.

Remote output is untrusted and often incomplete (an SSH channel can drop mid-line), so every
parser here is strict about what it accepts, and `parse_probe` turns whatever it cannot read
into a `Problem` instead of raising. No I/O, no Django.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from .commands import GPU_FIELDS, HTTP_MARK, MARK_BEGIN, MARK_END
from .state import (
    ComputeApp,
    DeploymentState,
    GpuState,
    HostState,
    IntegrityReport,
    Problem,
    ServerState,
    UnitState,
)

__all__ = [
    "HttpResult",
    "ParseError",
    "ProbeParse",
    "Section",
    "parse_compute_apps",
    "parse_gpu_csv",
    "parse_http",
    "parse_integrity",
    "parse_models_json",
    "parse_probe",
    "parse_process_units",
    "parse_sha256sum",
    "parse_systemctl_show",
    "parse_vllm_metrics",
    "split_sections",
]

MAX_MESSAGE = 300  # problem messages quote remote text; keep them readable
NO_OUTPUT = "no output (probe cut short)"


class ParseError(ValueError):
    """Remote output that cannot be read as what the command should have printed."""


@dataclass(frozen=True)
class Section:
    """One framed part of the probe output. No end marker means the output was cut short."""

    name: str
    output: str
    exit_status: int | None
    truncated: bool


@dataclass(frozen=True)
class HttpResult:
    """A curl response: body, HTTP status (None when no response arrived), curl's error text."""

    body: str
    status: int | None
    error: str | None


@dataclass
class ProbeParse:
    state: HostState
    sections: dict[str, Section] = field(default_factory=dict)


def _excerpt(text: str, limit: int = MAX_MESSAGE) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return _excerpt(line)
    return ""


# --- sections ------------------------------------------------------------------------------

_END_STATUS_RE = re.compile(r"([0-9]{1,3})")


def _end_marker_status(line: str, name: str) -> tuple[str, int] | None:
    """(text before the marker, status) if `line` ends with the end marker of section `name`.

    The marker may follow output that had no final newline, so it is looked for at the end of
    the line, and only for the open section, so other text cannot close it by accident.
    """
    marker = f"{MARK_END}{name}:"
    pos = line.rfind(marker)
    if pos < 0:
        return None
    match = _END_STATUS_RE.fullmatch(line[pos + len(marker) :])
    if not match or int(match.group(1)) > 255:
        return None
    return line[:pos], int(match.group(1))


def split_sections(stdout: str) -> dict[str, Section]:
    """Split probe output by its marker lines. Text outside sections is dropped.

    Only newline-terminated marker lines count: a last line cut short could be a marker whose
    name or exit status lost characters (`...:12` from `...:127`).
    """
    sections: dict[str, Section] = {}
    pieces = stdout.replace("\r\n", "\n").split("\n")
    name: str | None = None
    output: list[str] = []
    for i, piece in enumerate(pieces):
        complete = i < len(pieces) - 1
        if not complete and piece == "":
            break
        if complete and piece.startswith(MARK_BEGIN) and len(piece) > len(MARK_BEGIN):
            if name is not None:
                sections[name] = Section(name, "".join(output), None, True)
            name, output = piece[len(MARK_BEGIN) :], []
            continue
        if name is None:
            continue  # banner, MOTD or other stray text between sections
        ended = _end_marker_status(piece, name) if complete else None
        if ended is not None:
            before, status = ended
            sections[name] = Section(name, "".join(output) + before, status, False)
            name, output = None, []
            continue
        if not complete and (f"{MARK_END}{name}:".startswith(piece) or MARK_END in piece):
            break  # a marker cut mid-line is not output
        output.append(piece + "\n" if complete else piece)
    if name is not None:
        sections[name] = Section(name, "".join(output), None, True)
    return sections


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
_NUMBER_RE = re.compile(r"([-+]?[0-9]+(?:\.[0-9]+)?)(?:\s*(MiB|W|%|C))?")
_DIGITS_RE = re.compile(r"[0-9]+")

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


def _is_unavailable(value: str) -> bool:
    """`[N/A]`, `[Not Supported]`, `[Unknown Error]`, `[GPU is lost]`... and plain `N/A`."""
    return value in {"", "N/A"} or (value.startswith("[") and value.endswith("]"))


def _number(value: str, unit: str | None) -> float | None:
    if _is_unavailable(value):
        return None
    match = _NUMBER_RE.fullmatch(value)
    if not match or (match.group(2) is not None and match.group(2) != unit):
        raise ParseError(f"not a number{' in ' + unit if unit else ''}: {value!r}")
    return float(match.group(1))


def _smi_fatal(text: str) -> str | None:
    line = _first_line(text)
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
            bad.append(f"line {number}: {_excerpt(line)}")
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
    if _first_line(text) == _NO_DEVICES and len(text.strip().splitlines()) == 1:
        return []
    columns = list(fields)

    def row(line: str, position: int) -> GpuState:
        values = [v.strip() for v in line.split(",")]
        if values[0] == columns[0]:
            raise ParseError("unexpected header line (use --format=csv,noheader)")
        if len(values) != len(columns):
            shown = _excerpt(line, 120)
            raise ParseError(f"expected {len(columns)} columns, got {len(values)}: {shown!r}")
        attrs: dict[str, Any] = {}
        for column, value in zip(columns, values, strict=True):
            if column not in _GPU_COLUMNS:
                continue
            attr, kind, unit = _GPU_COLUMNS[column]
            if kind == "str":
                attrs[attr] = None if _is_unavailable(value) else value
            else:
                number = _number(value, unit)
                attrs[attr] = number if number is None or kind == "float" else round(number)
        if attrs.setdefault("index", position) is None:
            raise ParseError(f"GPU index unavailable: {_excerpt(line, 120)!r}")
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
        looks_like_memory = _is_unavailable(before_last) or before_last.endswith("MiB")
        if "," in head and (
            last.strip().startswith("GPU-") or (_is_unavailable(last.strip()) and looks_like_memory)
        ):  # the last column is the GPU's UUID, the one before it the memory
            uuid = None if _is_unavailable(last.strip()) else last.strip()
            rest = head
        name, comma, memory = rest.rpartition(",")
        if not comma:
            raise ParseError(f"expected 4 columns: {_excerpt(line, 120)!r}")
        if not _DIGITS_RE.fullmatch(pid.strip()):
            raise ParseError(f"not a process id: {pid.strip()!r}")
        used = _number(memory.strip(), "MiB")
        return ComputeApp(int(pid), name.strip(), None if used is None else round(used), uuid)

    apps: list[ComputeApp] = _smi_rows(text, row, problems)
    return apps


_PS_LINE_RE = re.compile(r"\s*(\d+)\s+(\S+)\s*")


def parse_process_units(text: str) -> dict[int, str | None]:
    """`ps -e -o pid=,unit=`: each process id with its systemd unit or scope (`-`: none).

    A line that is not `PID UNIT` means ps did not understand the request (no systemd support,
    a BusyBox ps): that raises, since owners that cannot be read must not look like "none".
    """
    units: dict[int, str | None] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _PS_LINE_RE.fullmatch(line)
        if match is None:
            raise ParseError(f"line {number}: not `PID UNIT`: {_excerpt(line, 120)!r}")
        units[int(match.group(1))] = None if match.group(2) == "-" else match.group(2)
    if not units:
        raise ParseError("ps printed nothing")
    return units


# --- systemd, sha256sum --------------------------------------------------------------------

_PROPERTY_RE = re.compile(r"([A-Z][A-Za-z0-9]*)=(.*)")
_UNSET = {"", "[not set]"}


def _int_property(props: dict[str, str], key: str) -> int | None:
    value = props.get(key, "")
    if value in _UNSET:
        return None
    if not _DIGITS_RE.fullmatch(value):
        raise ParseError(f"{key} is not a number: {value!r}")
    return int(value)


def parse_systemctl_show(text: str, unit: str) -> UnitState:
    """`systemctl show -p ...` output: `Key=Value` lines in any order, values may hold `=`.

    A unit that does not exist is a valid answer (LoadState=not-found). Output with no
    property at all (`Failed to get properties: Access denied`, no systemd) raises ParseError.
    """
    props: dict[str, str] = {}
    for line in text.splitlines():
        match = _PROPERTY_RE.fullmatch(line.strip())
        if match:
            props[match.group(1)] = match.group(2)
    if not props:
        raise ParseError(_first_line(text) or "systemctl printed nothing")

    def text_property(key: str) -> str | None:
        value = props.get(key, "")
        return None if value in _UNSET else value

    return UnitState(
        unit=unit,
        load_state=text_property("LoadState"),
        active_state=text_property("ActiveState"),
        sub_state=text_property("SubState"),
        main_pid=_int_property(props, "MainPID"),
        active_enter_timestamp=text_property("ActiveEnterTimestamp"),
        n_restarts=_int_property(props, "NRestarts"),
        fragment_path=text_property("FragmentPath"),
    )


_SHA256_RE = re.compile(r"\\?([0-9a-fA-F]{64}) [ *].+")


def parse_sha256sum(text: str) -> str | None:
    """The digest from `sha256sum -- <path>`; None when the file does not exist."""
    line = text.strip()
    match = _SHA256_RE.fullmatch(line)
    if match:
        return match.group(1).lower()
    if line.endswith("No such file or directory") and "sha256sum: " in line:
        return None
    raise ParseError(_first_line(text) or "sha256sum printed nothing")


# --- HTTP (curl) ---------------------------------------------------------------------------

_HTTP_TRAILER_RE = re.compile(re.escape(HTTP_MARK) + r"([0-9]{3})")
_CURL_ERROR_RE = re.compile(r"curl: \(\d+\) .*")


def parse_http(text: str) -> HttpResult:
    """Split curl's `@@cp:http:<code>` trailer (added by `-w`) off the body.

    curl writes its error line to stderr, which lands before or after the buffered body, so it
    is looked for on a line of its own anywhere and taken out of the body. `000` means no
    response: status None and the curl error in `error`. No trailer at all: output cut short.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    for marker in range(len(lines) - 1, -1, -1):
        trailer = _HTTP_TRAILER_RE.fullmatch(lines[marker])
        if trailer:
            break
    else:
        return HttpResult(body=text, status=None, error="truncated")
    code = int(trailer.group(1))
    errors = [line for line in lines if _CURL_ERROR_RE.fullmatch(line)]
    # Joining drops the `\n` that -w writes before the trailer, so the body is byte-exact.
    body = "\n".join(line for line in lines[:marker] if not _CURL_ERROR_RE.fullmatch(line))
    error = _excerpt(errors[-1]) if errors else None
    if code == 0:
        return HttpResult(body=body, status=None, error=error or "no HTTP response")
    return HttpResult(body=body, status=code, error=error)


# --- server endpoints ----------------------------------------------------------------------


def _load_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"{what} is not JSON ({exc}): {_excerpt(text, 120)!r}") from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_models_json(body: str) -> tuple[list[str], list[str], int | None]:
    """Served ids, their roots and the context length from an OpenAI-style `/v1/models`.

    vLLM and SGLang both answer `{"object": "list", "data": [{"id": ..., "root": ...,
    "max_model_len": ...}]}`; root and max_model_len may be absent (older SGLang, LoRA cards).
    max_model_len is the first one given, i.e. the base model's.
    """
    payload = _load_json(body, "/v1/models")
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise ParseError(f"/v1/models has no 'data' list: {_excerpt(body, 120)!r}")
    ids: list[str] = []
    roots: list[str] = []
    max_model_len: int | None = None
    for card in data:
        if not isinstance(card, dict) or not isinstance(card.get("id"), str):
            raise ParseError(f"/v1/models entry without a string 'id': {_excerpt(str(card))!r}")
        ids.append(card["id"])
        root, length = card.get("root"), card.get("max_model_len")
        if root is not None and not isinstance(root, str):
            raise ParseError(f"/v1/models 'root' is not a string: {root!r}")
        if length is not None and not _is_int(length):
            raise ParseError(f"/v1/models 'max_model_len' is not an integer: {length!r}")
        if root:
            roots.append(root)
        if max_model_len is None and length is not None:
            max_model_len = length
    return ids, roots, max_model_len


_METRIC_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE_RE = re.compile(
    rf"({_METRIC_NAME})"
    r'(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?'  # labels; quoted values may hold } and \"
    r"[ \t]+(\S+)(?:[ \t]+-?\d+)?[ \t]*"  # value, optional timestamp
)
_NAME_START_RE = re.compile(_METRIC_NAME)
RUNNING_METRICS = ("vllm:num_requests_running", "sglang:num_running_reqs")
WAITING_METRICS = ("vllm:num_requests_waiting", "sglang:num_queue_reqs")
KV_CACHE_METRICS = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")
_WANTED = frozenset(RUNNING_METRICS + WAITING_METRICS + KV_CACHE_METRICS)


def _metric_samples(text: str) -> dict[str, list[float]]:
    """Values of the wanted metrics, one per label set.

    A small strict line parser rather than prometheus_client (not a declared dependency, and
    one cut-off line makes its parser reject the whole page). A malformed line of a metric we
    use raises, since dropping it would make a sum silently wrong; other lines are skipped.
    """
    samples: dict[str, list[float]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        start = _NAME_START_RE.match(line)
        if not start or start.group(0) not in _WANTED:
            continue
        match = _SAMPLE_RE.fullmatch(line)
        try:
            value = float(match.group(3)) if match else None
        except ValueError:
            value = None
        if value is None:
            raise ParseError(f"malformed metric line: {_excerpt(line, 160)!r}")
        samples.setdefault(start.group(0), []).append(value)
    return samples


def _first_family(samples: dict[str, list[float]], names: Sequence[str]) -> list[float] | None:
    """Finite values of the first metric present; NaN and ±Inf say nothing about load."""
    for name in names:
        if name in samples:
            values = [v for v in samples[name] if math.isfinite(v)]
            return values or None
    return None


def parse_vllm_metrics(text: str) -> tuple[float | None, float | None, float | None]:
    """(requests running, requests waiting, KV-cache usage 0..1) from Prometheus text.

    Request counts are summed over label sets (data-parallel engines, several models). KV-cache
    usage is a fraction per engine, so it is averaged instead: a sum could exceed 1. Newer vLLM
    names are preferred over older ones; SGLang's names are accepted. Missing metric: None.
    """
    samples = _metric_samples(text)
    running = _first_family(samples, RUNNING_METRICS)
    waiting = _first_family(samples, WAITING_METRICS)
    kv_cache = _first_family(samples, KV_CACHE_METRICS)
    return (
        None if running is None else sum(running),
        None if waiting is None else sum(waiting),
        None if kv_cache is None else sum(kv_cache) / len(kv_cache),
    )


def _str_list(payload: dict[str, Any], key: str) -> list[str]:
    value = payload.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ParseError(f"integrity {key!r} is not a list of paths")
    return value


def _integrity_from(payload: dict[str, Any]) -> IntegrityReport:
    dist, version = payload.get("dist"), payload.get("version")
    if "error" in payload:
        return IntegrityReport(
            dist=dist if isinstance(dist, str) else None, error=str(payload["error"])
        )
    checked = payload.get("checked")
    if not (isinstance(dist, str) and isinstance(version, str) and isinstance(checked, int)):
        raise ParseError("integrity report lacks dist, version or checked")
    if isinstance(checked, bool):
        raise ParseError(f"integrity 'checked' is not a count: {checked!r}")
    return IntegrityReport(
        dist=dist,
        version=version,
        checked=checked,
        modified=_str_list(payload, "modified"),
        missing=_str_list(payload, "missing"),
        added=_str_list(payload, "added"),
    )


def parse_integrity(text: str) -> IntegrityReport:
    """The JSON line of commands.INTEGRITY_SCRIPT. Never raises: unreadable output (a Python
    traceback, a missing interpreter) becomes a report with `error` set to its telling line.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):  # warnings may precede the report
        if not line.startswith("{"):
            continue
        try:
            payload = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(payload, dict):
            try:
                return _integrity_from(payload)
            except ParseError as exc:
                return IntegrityReport(error=str(exc))
    if not lines:
        return IntegrityReport(error="no output")
    # A traceback's last line names the exception; a shell error is its only line.
    return IntegrityReport(error=_excerpt(lines[-1]))


# --- the whole probe -----------------------------------------------------------------------


class _Collector:
    """Problems of one probe parse, and the sections they come from."""

    def __init__(self, sections: dict[str, Section]) -> None:
        self.sections = sections
        self.problems: list[Problem] = []

    def add(self, section: str, message: str) -> None:
        self.problems.append(Problem(section, _excerpt(message) or "unreadable output"))

    def take(self, name: str) -> Section | None:
        """The section if it ran to its end marker; otherwise a Problem and None."""
        section = self.sections.get(name)
        if section is None:
            self.add(name, NO_OUTPUT)
            return None
        if section.truncated:
            self.add(name, "output cut short (no end marker)")
            return None
        return section

    def attempt(self, name: str, parse: Callable[[], Any]) -> Any:
        """Run one parser; what it cannot read becomes a Problem, never an exception."""
        try:
            return parse()
        except ParseError as exc:
            self.add(name, str(exc))
        except Exception as exc:  # a parser bug must not lose the rest of the probe
            self.add(name, f"parser failed: {exc!r}")
        return None

    def check_exit(self, section: Section, command: str, before: int) -> None:
        """A non-zero exit is a Problem, unless the output already explained itself."""
        if section.exit_status and len(self.problems) == before:
            detail = _first_line(section.output)
            suffix = f": {detail}" if detail else ""
            self.add(section.name, f"{command} exited with status {section.exit_status}{suffix}")


def _parse_smi(
    out: _Collector, name: str, parse: Callable[..., list[Any]], benign_exit: int
) -> list[Any]:
    """nvidia-smi exits 6 when it finds no GPU: an empty answer, not a failure."""
    section = out.take(name)
    if section is None:
        return []
    before = len(out.problems)
    bad_rows: list[str] = []
    rows = out.attempt(name, lambda: parse(section.output, problems=bad_rows))
    for message in bad_rows:
        out.add(name, message)
    if rows == [] and section.exit_status == benign_exit:
        return []
    out.check_exit(section, "nvidia-smi", before)
    return rows or []


def _assign_owners(out: _Collector, apps: list[ComputeApp]) -> None:
    """Name the unit each GPU process runs in, from the `processes` section."""
    section = out.take("processes")
    if section is None:
        return
    before = len(out.problems)
    owners = out.attempt(section.name, lambda: parse_process_units(section.output))
    out.check_exit(section, "ps", before)
    if owners:
        for app in apps:
            app.unit = owners.get(app.pid)


def _parse_unit(out: _Collector, unit: str) -> UnitState:
    section = out.take(f"unit:{unit}")
    if section is None:
        return UnitState(unit=unit)
    before = len(out.problems)
    state = out.attempt(section.name, lambda: parse_systemctl_show(section.output, unit))
    out.check_exit(section, "systemctl", before)
    return state if isinstance(state, UnitState) else UnitState(unit=unit)


def _parse_unit_file(out: _Collector, unit: str) -> str | None:
    section = out.take(f"unitfile:{unit}")
    if section is None:
        return None
    digest: str | None = out.attempt(section.name, lambda: parse_sha256sum(section.output))
    return digest


def _http(out: _Collector, name: str) -> HttpResult | None:
    """The curl result of a section, or None (with a Problem) if curl itself did not answer."""
    section = out.take(name)
    if section is None:
        return None
    result = parse_http(section.output)
    if result.error == "truncated":  # complete section, yet no trailer: curl did not run
        detail = _first_line(section.output)
        out.add(name, "no HTTP status in output" + (f": {detail}" if detail else ""))
        return None
    return result


def _usable_body(out: _Collector, name: str, result: HttpResult | None) -> str | None:
    """A 200 body worth parsing. Unreachable or non-200 is normal (stopped or loading server)."""
    if result is None or result.status != 200:
        return None
    if result.error is not None:  # a 200 whose transfer failed half-way
        out.add(name, f"incomplete response: {result.error}")
        return None
    return result.body


def _parse_server(out: _Collector, unit: str) -> ServerState:
    server = ServerState()
    health = _http(out, f"health:{unit}")
    if health is not None:
        server.health_http_status = health.status
        server.healthy = health.status == 200 and health.error is None
    models_name = f"models:{unit}"
    body = _usable_body(out, models_name, _http(out, models_name))
    if body is not None:
        models = out.attempt(models_name, lambda: parse_models_json(body))
        if models is not None:
            server.models, server.model_roots, server.max_model_len = models
    metrics_name = f"metrics:{unit}"
    metrics_body = _usable_body(out, metrics_name, _http(out, metrics_name))
    if metrics_body is not None:
        values = out.attempt(metrics_name, lambda: parse_vllm_metrics(metrics_body))
        if values is not None:
            server.requests_running, server.requests_waiting, server.kv_cache_usage = values
    return server


def _parse_integrity_section(out: _Collector, unit: str) -> IntegrityReport | None:
    section = out.take(f"integrity:{unit}")
    if section is None:
        return None
    report = parse_integrity(section.output)
    # The script's own {"error": ...} (exit 3) is a finding; anything else means unreadable.
    answered = report.error is None or (report.dist is not None and section.exit_status == 3)
    if not answered:
        out.add(section.name, report.error or "unreadable output")
    elif report.error is None and section.exit_status:
        out.add(section.name, f"integrity check exited with status {section.exit_status}")
    return report


def _integrity_units(integrity: bool | Collection[str], units: Sequence[str]) -> frozenset[str]:
    if isinstance(integrity, bool):
        return frozenset(units) if integrity else frozenset()
    if isinstance(integrity, str):
        return frozenset({integrity})
    return frozenset(integrity)


def parse_probe(
    stdout: str, units: Sequence[str], *, integrity: bool | Collection[str]
) -> ProbeParse:
    """Everything the probe script printed, as a HostState. Never raises on remote output.

    Each section that is missing, cut short, unreadable or failed unexpectedly adds a Problem
    and leaves its part empty. A stopped unit or an unreachable server is a state, not a
    problem. `integrity` is True when every unit was checked, or the units that were (the
    probe skips those without an engine interpreter).
    """
    sections = split_sections(stdout)
    out = _Collector(sections)
    state = HostState()
    state.gpus = _parse_smi(out, "gpus", parse_gpu_csv, benign_exit=6)
    state.compute_apps = _parse_smi(out, "compute_apps", parse_compute_apps, benign_exit=6)
    _assign_owners(out, state.compute_apps)
    checked = _integrity_units(integrity, units)
    for unit in units:
        state.deployments[unit] = DeploymentState(
            unit=_parse_unit(out, unit),
            unit_file_sha256=_parse_unit_file(out, unit),
            server=_parse_server(out, unit),
            integrity=_parse_integrity_section(out, unit) if unit in checked else None,
        )
    state.problems = out.problems
    return ProbeParse(state=state, sections=sections)
