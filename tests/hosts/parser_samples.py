"""Samples and helpers shared by the tests of the probe's parsers (test_parsers_*.py).

Samples are in the formats the real tools print. tests/hosts/samples/probe_two_units.txt is the
output of `probe_sections.probe_script` run through bash with real curl (against a stand-in vLLM
server), real sha256sum and the real integrity script, and stand-ins for nvidia-smi and
systemctl printing what those print; its unit reads two environment files (one missing, which
is optional) and the second, missing unit had its journal asked for. Its GPU fault sections
(gpu_errors to xid_events) were added later, framed from `gpu_fault_sections()` below.
"""

from __future__ import annotations

from pathlib import Path

from hosts.commands import MARK_BEGIN, MARK_END, ProbeSpec, ServerSpec
from hosts.probe_sections import probe_sections

SAMPLES = Path(__file__).parent / "samples"
KIMI = "vllm-kimi-k25.service"
QWEN = "sglang-qwen3.service"
UNITS = [KIMI, QWEN]


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def frame(name: str, output: str, status: int = 0) -> str:
    """One section as the probe script frames it: `echo begin; cmd 2>&1; echo end"$?"`."""
    return f"{MARK_BEGIN}{name}\n{output}{MARK_END}{name}:{status}\n"


# What the probe of these tests asks for beyond the defaults: KIMI's environment files (as its
# last snapshot named them) and QWEN's journal (last seen failing).
ENV_FILES = {KIMI: ("/etc/vllm/kimi-k25.env", "/etc/vllm/common.env")}
JOURNAL_LINES = {QWEN: 20}


def section_names(units: list[str], integrity: bool = True) -> list[str]:
    spec = ProbeSpec(
        servers=tuple(
            ServerSpec(
                u,
                8000,
                "/opt/venv/bin/python",
                environment_files=ENV_FILES.get(u, ()),
                journal_lines=JOURNAL_LINES.get(u, 0),
            )
            for u in units
        ),
        integrity=integrity,
    )
    return [name for name, _ in probe_sections(spec)]


# --- real-format outputs -------------------------------------------------------------------

# `ps -e -o pid=,unit=` (procps-ng): PID right-aligned, then the unit or scope, `-` for none.
PS_UNITS = (
    "      1 init.scope\n"
    "      2 -\n"
    "    812 systemd-journald.service\n"
    "2314567 vllm-kimi-k25.service\n"
    "2318001 session-3.scope\n"
)

SMI_DRIVER_FAILED = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n\n"
)
SMI_NVML_MISMATCH = (
    "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.127\n"
)
SMI_NO_DEVICES = "No devices were found\n"
SMI_GPU_LOST = "Unable to determine the device handle for GPU0000:CB:00.0: Unknown Error\n"
CURL_REFUSED = (
    "curl: (7) Failed to connect to 127.0.0.1 port 8000 after 0 ms: Couldn't connect to server\n"
)

SHOW_ACTIVE = """\
Id=vllm-kimi-k25.service
NRestarts=2
MainPID=2314501
LoadState=loaded
ActiveState=active
SubState=running
FragmentPath=/etc/systemd/system/vllm-kimi-k25.service
ActiveEnterTimestamp=Tue 2025-11-04 09:12:44 UTC
"""
UNIT_SHA = "704b731802c159adf8d86697cea0ad62579f43d4fc5ab4be9c5e088e950e2e54"
INTEGRITY_CLEAN = (
    '{"dist": "vllm", "version": "0.11.2", "checked": 1873, '
    '"modified": [], "missing": [], "added": []}\n'
)
INTEGRITY_MODIFIED = (
    '{"dist": "vllm", "version": "0.11.2", "checked": 1873, '
    '"modified": ["vllm/entrypoints/openai/api_server.py"], '
    '"missing": ["vllm/_C.abi3.so"], "added": ["vllm/sitecustomize.py"]}\n'
)
INTEGRITY_TRACEBACK = """\
Traceback (most recent call last):
  File "<string>", line 17, in <module>
PermissionError: [Errno 13] Permission denied: '/opt/vllm/lib/python3.12/site-packages/vllm/x.py'
"""


def http(body: str, code: int) -> str:
    """What `curl -sS -w '\\n@@cp:http:%{http_code}\\n'` prints for a response."""
    return f"{body}\n@@cp:http:{code:03d}\n"


# --- the GPU fault sections of the 8 x H100 in nvidia_smi_8x_h100.csv ------------------------

H100_BUS_IDS = [f"00000000:{bus}:00.0" for bus in ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")]


def h100_uuids() -> list[str]:
    return [line.split(", ")[1] for line in sample("nvidia_smi_8x_h100.csv").splitlines()]


def gpu_error_rows(aggregate: dict[int, int] | None = None) -> str:
    """`gpu_errors` of a healthy H100 host: no lifetime uncorrectable errors, page retirement
    `[N/A]` (Hopper remaps rows instead), MIG off."""
    counts = aggregate or {}
    rows = (
        f"{i}, {bus}, {counts.get(i, 0)}, [N/A], Disabled\n" for i, bus in enumerate(H100_BUS_IDS)
    )
    return "".join(rows)


def remapped_row_rows(rows: dict[int, str] | None = None) -> str:
    """`remapped_rows` (uuid, correctable, uncorrectable, pending, failure); `rows` replaces a
    GPU's four values."""
    replace = rows or {}
    return "".join(f"{u}, {replace.get(i, '0, 0, 0, 0')}\n" for i, u in enumerate(h100_uuids()))


def nvlink_status(inactive: dict[int, int] | None = None) -> str:
    """`nvidia-smi nvlink -s` of eight H100 SXM: 18 links each at 26.562 GB/s."""
    off = inactive or {}
    lines = []
    for i, uuid in enumerate(h100_uuids()):
        lines.append(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: {uuid})")
        for link in range(18):
            value = "<inactive>" if off.get(i) == link else "26.562 GB/s"
            lines.append(f"\t Link {link}: {value}")
    return "\n".join(lines) + "\n"


def nvlink_errors(counts: dict[tuple[int, int], int] | None = None) -> str:
    """`nvidia-smi nvlink -e`: `counts` sets (GPU, link)'s replay and CRC errors."""
    errors = counts or {}
    lines = []
    for i, uuid in enumerate(h100_uuids()):
        lines.append(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: {uuid})")
        for link in range(18):
            n = errors.get((i, link), 0)
            lines += [
                f"\t Link {link}: Replay Errors: {n}",
                f"\t Link {link}: Recovery Errors: 0",
                f"\t Link {link}: CRC Errors: {n}",
            ]
    return "\n".join(lines) + "\n"


def xid_line(code: int, bus: str, message: str, at: str = "2025-12-01T08:00:00+00:00") -> str:
    """One Xid as `journalctl -k -o short-iso` prints it."""
    return f"{at} gpu-01 kernel: NVRM: Xid (PCI:0000:{bus.lower()}:00): {code}, {message}\n"


def gpu_fault_sections() -> dict[str, tuple[str, int]]:
    """The probe's GPU fault sections of a healthy H100 host (no Xid this boot)."""
    return {
        "gpu_errors": (gpu_error_rows(), 0),
        "remapped_rows": (remapped_row_rows(), 0),
        "nvlink_status": (nvlink_status(), 0),
        "nvlink_errors": (nvlink_errors(), 0),
        "xid_events": ("", 0),
    }
