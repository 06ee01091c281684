"""Every remote command line the control plane sends is built here, from validated parts,
with each part passed through `shlex.quote`.

The probe is one script run over one SSH channel. Each section is framed by marker lines so the
parser can split the output and read each section's exit status:

    @@cp:begin:<section>
    ...the command's stdout and stderr...
    @@cp:end:<section>:<exit status>
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from . import validators

MARK_BEGIN = "@@cp:begin:"
MARK_END = "@@cp:end:"
HTTP_MARK = "@@cp:http:"
UNIT_DIR = "/etc/systemd/system"
CURL_TIMEOUT_SECONDS = 5

GPU_FIELDS = (
    "index",
    "uuid",
    "name",
    "memory.used",
    "memory.total",
    "power.draw",
    "power.limit",
    "utilization.gpu",
    "temperature.gpu",
)
# The second GPU query (section `gpu_details`): what `nvidia-smi -q` shows by hand. The `gpus`
# query above stays as it was, so old snapshots and the fit check read the same fields.
# `clocks_event_reasons.active` is the name drivers since R535 (and 580) print; older drivers
# know only `clocks_throttle_reasons.active` and refuse the whole query, which the parser
# reports as a problem naming the field.
GPU_DETAIL_FIELDS = (
    "index",
    "driver_version",
    "pstate",
    "persistence_mode",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.volatile.total",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "clocks_event_reasons.active",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
)
# The third GPU query (section `gpu_errors`): memory faults that outlive the driver's load. Its
# own query, so a driver that refuses one of these fields loses this section, not the others.
GPU_ERROR_FIELDS = (
    "index",
    "pci.bus_id",
    "ecc.errors.uncorrected.aggregate.total",
    "retired_pages.pending",
    "mig.mode.current",
)
# Row remapping (Ampere and later, HBM): its own query in nvidia-smi.
REMAPPED_ROW_FIELDS = (
    "gpu_uuid",
    "remapped_rows.correctable",
    "remapped_rows.uncorrectable",
    "remapped_rows.pending",
    "remapped_rows.failure",
)
# The kernel log's Xid lines of the current boot, newest last. A fatal Xid holds until the GPU
# is reset, which on these hosts is a reboot: reading the boot, not the time since the last
# probe, keeps it in every snapshot until then. Bounded on the host.
# journalctl's --grep is a PCRE2 pattern; `.` for the space keeps the sudoers line exact.
XID_PATTERN = "NVRM:.Xid"
XID_MAX_LINES = 50
# DCGM's diagnostic, on demand only: level 1 checks the deployment (seconds), level 2 adds PCIe
# and memory tests (minutes). Read-only; a probe that asks for it waits this long at most.
DIAGNOSTIC_LEVELS = (1, 2)
DIAGNOSTIC_TIMEOUT_SECONDS = 600
COMPUTE_APP_FIELDS = ("pid", "process_name", "used_memory", "gpu_uuid")
UNIT_PROPERTIES = (
    "Id",
    "LoadState",
    "ActiveState",
    "SubState",
    "Result",
    "MainPID",
    "ExecMainPID",
    "ExecMainCode",
    "ExecMainStatus",
    "ActiveEnterTimestamp",
    "ExecMainStartTimestamp",
    "NRestarts",
    "MemoryCurrent",
    "MemoryPeak",
    "CPUUsageNSec",
    "TasksCurrent",
    "ControlGroup",
    "FragmentPath",
    "DropInPaths",
    "UnitFileState",
    "NeedDaemonReload",
    "EnvironmentFiles",
)
# A journal tail is bounded twice: by lines on the host, and by bytes when it is parsed.
JOURNAL_MAX_LINES = 1000
JOURNAL_MAX_BYTES = 16 * 1024
# Environment files read per unit: enough for any sane unit, and a bound on the script.
MAX_ENVIRONMENT_FILES = 16

# Runs on the host with the engine's own interpreter: compares the installed files of a Python
# distribution with the hashes in its RECORD (PEP 376/627), and lists files that were added
# under its top-level packages. Prints one JSON object. Read-only.
INTEGRITY_SCRIPT = r"""
import base64, hashlib, json, os, sys
from importlib import metadata
try:
    dist = metadata.distribution(sys.argv[1])
except metadata.PackageNotFoundError:
    print(json.dumps({"error": "distribution not installed", "dist": sys.argv[1]})); sys.exit(3)
base = os.path.normpath(str(dist.locate_file("")))
recorded, modified, missing, checked = set(), [], [], 0
files = list(dist.files or [])
for f in files:
    path = os.path.normpath(str(f.locate()))
    recorded.add(path)
    if f.hash is None:
        continue
    checked += 1
    try:
        with open(path, "rb") as fh:
            digest = hashlib.new(f.hash.mode, fh.read()).digest()
    except FileNotFoundError:
        missing.append(str(f)); continue
    if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != f.hash.value:
        modified.append(str(f))
tops = {str(f).split("/")[0] for f in files if "/" in str(f)}
tops = {t for t in tops if not t.endswith((".dist-info", ".data")) and t != ".."}
added = []
for top in sorted(tops):
    for root, dirs, names in os.walk(os.path.join(base, top)):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            path = os.path.normpath(os.path.join(root, name))
            if path not in recorded and not name.endswith(".pyc"):
                added.append(os.path.relpath(path, base))
print(json.dumps({"dist": dist.metadata["Name"], "version": dist.version,
                  "checked": checked, "modified": sorted(modified),
                  "missing": sorted(missing), "added": sorted(added)}))
""".strip()


class UnsafeCommand(ValueError):
    """A part of a command failed validation; nothing was sent."""


def _check(pattern: str, value: str, what: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(pattern, value):
        raise UnsafeCommand(f"refusing to send {what} {value!r}")
    return value


def check_unit(unit: str) -> str:
    return _check(validators.UNIT_RE, unit, "unit name")


def check_path(path: str) -> str:
    return _check(validators.ABS_PATH_RE, path, "path")


def check_port(port: int) -> int:
    if not isinstance(port, int) or not 1 <= port <= 65535:
        raise UnsafeCommand(f"refusing to send port {port!r}")
    return port


def check_address(address: str) -> str:
    if not validators.plain_ip_address(address):
        raise UnsafeCommand(f"refusing to send address {address!r}")
    return address


def join(argv: Sequence[str | int]) -> str:
    return " ".join(shlex.quote(str(a)) for a in argv)


@dataclass(frozen=True)
class ServerSpec:
    """One inference server a host is expected to run (from its Deployment).

    `environment_files` are the paths (without systemd's `-`) of the unit's EnvironmentFile=
    files to read. The probe is one static script and those paths are only known once the unit
    has been read, so the caller passes the ones the host's last snapshot saw (see
    `hosts.services.probe_spec_for`); empty means no environment file sections. `journal_lines`
    above 0 adds the unit's newest journal lines (e.g. for a unit seen failing last time).
    """

    unit: str
    port: int
    engine_python: str = ""
    engine_dist: str = "vllm"
    environment_files: tuple[str, ...] = ()
    journal_lines: int = 0


@dataclass(frozen=True)
class ProbeSpec:
    servers: tuple[ServerSpec, ...] = field(default_factory=tuple)
    integrity: bool = False
    # Environment files are usually root-only and the journal needs a privileged group: on
    # hosts that say so, read those two under `sudo -n` (the sudoers entry in
    # docs/operations/hosts.md).
    sudo: bool = False
    # DCGM's diagnostic at this level (DIAGNOSTIC_LEVELS), on an operator's request; 0: none.
    gpu_diagnostic: int = 0


def unit_show(unit: str) -> list[str]:
    return ["systemctl", "show", check_unit(unit), "--no-pager", "-p", ",".join(UNIT_PROPERTIES)]


def unit_file_hash(unit: str) -> list[str]:
    return ["sha256sum", "--", f"{UNIT_DIR}/{check_unit(unit)}"]


def unit_cat(unit: str) -> list[str]:
    """The unit's fragment and drop-ins as systemd loaded them, read-only, each after a
    `# /path` line; exits 1 with `No files found for <unit>.` when there is none."""
    return ["systemctl", "cat", "--no-pager", check_unit(unit)]


def file_hash(path: str) -> list[str]:
    return ["sha256sum", "--", check_path(path)]


def file_read(path: str) -> list[str]:
    return ["cat", "--", check_path(path)]


def host_clock() -> list[str]:
    """The host's own clock, in seconds since the epoch: systemd's timestamps are on it."""
    return ["date", "+%s"]


def gpu_query() -> list[str]:
    return ["nvidia-smi", f"--query-gpu={','.join(GPU_FIELDS)}", "--format=csv,noheader"]


def gpu_details_query() -> list[str]:
    return ["nvidia-smi", f"--query-gpu={','.join(GPU_DETAIL_FIELDS)}", "--format=csv,noheader"]


def gpu_errors_query() -> list[str]:
    return ["nvidia-smi", f"--query-gpu={','.join(GPU_ERROR_FIELDS)}", "--format=csv,noheader"]


def remapped_rows_query() -> list[str]:
    return [
        "nvidia-smi",
        f"--query-remapped-rows={','.join(REMAPPED_ROW_FIELDS)}",
        "--format=csv,noheader",
    ]


def nvlink_status() -> list[str]:
    """Each NVLink's speed, or `<inactive>`; nothing at all on boards without NVLink."""
    return ["nvidia-smi", "nvlink", "-s"]


def nvlink_errors() -> list[str]:
    """Each NVLink's replay, recovery and CRC error counters."""
    return ["nvidia-smi", "nvlink", "-e"]


def kernel_xids() -> list[str]:
    """The current boot's newest Xid lines from the kernel log (read-only)."""
    return [
        "journalctl",
        "-k",
        "-b",
        "-q",
        "--no-pager",
        "-o",
        "short-iso",
        "-n",
        str(XID_MAX_LINES),
        "--grep",
        XID_PATTERN,
    ]


def gpu_diagnostic(level: int) -> list[str]:
    """`dcgmi diag -r <level> -j`: DCGM's diagnostic as JSON (read-only)."""
    if level not in DIAGNOSTIC_LEVELS:
        raise UnsafeCommand(f"refusing a GPU diagnostic at level {level!r}")
    return ["dcgmi", "diag", "-r", str(level), "-j"]


def smi_version() -> list[str]:
    """Driver and CUDA version (drivers since about R550; older ones refuse the option)."""
    return ["nvidia-smi", "--version"]


def gpu_topology() -> list[str]:
    return ["nvidia-smi", "topo", "-m"]


def compute_apps_query() -> list[str]:
    return [
        "nvidia-smi",
        f"--query-compute-apps={','.join(COMPUTE_APP_FIELDS)}",
        "--format=csv,noheader",
    ]


def process_units() -> list[str]:
    """Every process with the systemd unit or scope it runs in: who owns each GPU process."""
    return ["ps", "-e", "-o", "pid=,unit="]


def http_get(port: int, path: str, *, config_on_stdin: bool = False) -> list[str]:
    """GET one of the server's read-only endpoints on the host's loopback. With
    `config_on_stdin`, curl also reads options from stdin (`curl_auth_config`): how the API
    key reaches it without appearing on a command line."""
    if path not in {"/health", "/v1/models", "/metrics"}:
        raise UnsafeCommand(f"refusing to fetch {path!r}")
    return [
        "curl",
        "-sS",
        "-m",
        str(CURL_TIMEOUT_SECONDS),
        "-w",
        f"\\n{HTTP_MARK}%{{http_code}}\\n",
        *(["-K", "-"] if config_on_stdin else []),
        f"http://127.0.0.1:{check_port(port)}{path}",
    ]


def curl_auth_config(api_key: str) -> str:
    """A curl config (for `-K -`) that sends `api_key` as a bearer token. A key is sent on
    stdin only, never as an argument, where `ps` and the shell's history would show it."""
    if not api_key or any(ord(c) < 0x20 or ord(c) == 0x7F for c in api_key):
        raise UnsafeCommand("refusing an API key that cannot be a header value")
    escaped = api_key.replace("\\", "\\\\").replace('"', '\\"')
    return f'header = "Authorization: Bearer {escaped}"\n'


def frame(name: str, output: str, exit_status: int) -> str:
    """Output framed as the probe script frames a section, for a section run on its own."""
    body = output if output.endswith("\n") or not output else output + "\n"
    return f"{MARK_BEGIN}{name}\n{body}{MARK_END}{name}:{exit_status}\n"


def integrity_check(engine_python: str, dist: str) -> list[str]:
    return [
        check_path(engine_python),
        "-I",
        "-c",
        INTEGRITY_SCRIPT,
        _check(validators.DIST_NAME_RE, dist, "distribution name"),
    ]


# --- state-changing commands (run by change jobs) ------------------------------------------


def with_sudo(argv: list[str], use_sudo: bool) -> list[str]:
    return ["sudo", "-n", *argv] if use_sudo else argv


def unit_action(action: str, unit: str) -> list[str]:
    if action not in {"start", "stop", "restart"}:
        raise UnsafeCommand(f"refusing systemctl action {action!r}")
    return ["systemctl", action, "--no-block", check_unit(unit)]


def daemon_reload() -> list[str]:
    return ["systemctl", "daemon-reload"]


def write_unit_file(unit: str) -> list[str]:
    """Writes stdin to the unit file (atomically enough for systemd: it reads on daemon-reload)."""
    return ["tee", "--", f"{UNIT_DIR}/{check_unit(unit)}"]


def unit_journal(unit: str, lines: int = 50) -> list[str]:
    return ["journalctl", "-u", check_unit(unit), "-n", str(int(lines)), "--no-pager", "-o", "cat"]


def check_journal_lines(lines: int) -> int:
    if not isinstance(lines, int) or isinstance(lines, bool) or not 1 <= lines <= JOURNAL_MAX_LINES:
        raise UnsafeCommand(f"refusing a journal tail of {lines!r} lines")
    return lines


def unit_journal_tail(unit: str, lines: int) -> list[str]:
    """The unit's newest `lines` journal entries with ISO timestamps (read-only): the probe's
    `journal:<unit>` section and a viewer's "show journal"."""
    return [
        "journalctl",
        "-u",
        check_unit(unit),
        "-n",
        str(check_journal_lines(lines)),
        "--no-pager",
        "-o",
        "short-iso",
    ]


def completion_request(port: int, body_json: str, *, max_seconds: int = 55) -> list[str]:
    """POST a completion; the body is JSON built by the caller with json.dumps."""
    return [
        "curl",
        "-sS",
        "-m",
        str(int(max_seconds)),
        "-w",
        f"\\n{HTTP_MARK}%{{http_code}}\\n",
        "-H",
        "Content-Type: application/json",
        "--data-binary",
        body_json,
        f"http://127.0.0.1:{check_port(port)}/v1/completions",
    ]


def render(argv: Sequence[str | int]) -> str:
    """One command line with stderr folded into stdout, as the job log shows it."""
    return join(argv) + " 2>&1"
