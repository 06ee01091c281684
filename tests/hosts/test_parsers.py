"""Parsers of probe output (hosts/parsers.py). Pure: text in, dataclasses out, no database.

Samples are in the formats the real tools print. tests/hosts/samples/probe_two_units.txt is the
output of `commands.probe_script` run through bash with real curl (against a stand-in vLLM
server), real sha256sum and the real integrity script, and stand-ins for nvidia-smi and
systemctl printing what those print; its unit reads two environment files (one missing, which
is optional) and the second, missing unit had its journal asked for.

The parsers of the sections added for parity with `systemctl status`, `journalctl` and
`nvidia-smi -q` have their own files: test_parsers_systemd.py, test_parsers_nvidia_details.py,
test_parsers_envfiles.py and test_parsers_journal.py.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from hosts.commands import MARK_BEGIN, MARK_END, ProbeSpec, ServerSpec, probe_sections
from hosts.parsers import (
    NO_OUTPUT,
    HttpResult,
    ParseError,
    ProbeParse,
    Section,
    parse_compute_apps,
    parse_gpu_csv,
    parse_http,
    parse_integrity,
    parse_models_json,
    parse_probe,
    parse_process_units,
    parse_sha256sum,
    parse_systemctl_show,
    parse_vllm_metrics,
    split_sections,
)
from hosts.state import (
    ComputeApp,
    DeploymentState,
    GpuState,
    IntegrityReport,
    Problem,
    UnitState,
)

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


def probe(stdout: str, units: list[str] = UNITS, *, integrity: Any = True) -> ProbeParse:
    """parse_probe as hosts.probe calls it for the spec of section_names()."""
    return parse_probe(
        stdout,
        units,
        integrity=integrity,
        environment_files=ENV_FILES,
        journal_lines=JOURNAL_LINES,
    )


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
MODELS_SGLANG = (
    '{"object":"list","data":[{"id":"qwen3-235b","object":"model","created":1762247564,'
    '"owned_by":"sglang","root":"Qwen/Qwen3-235B-A22B-Instruct-2507","max_model_len":131072}]}'
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
SHOW_NOT_FOUND = """\
Id=nope.service
NRestarts=0
MainPID=0
LoadState=not-found
ActiveState=inactive
SubState=dead
FragmentPath=
ActiveEnterTimestamp=
"""
SHOW_STOPPED = (
    SHOW_ACTIVE.replace("ActiveState=active", "ActiveState=inactive")
    .replace("SubState=running", "SubState=dead")
    .replace("MainPID=2314501", "MainPID=0")
)
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


ENV_TEXT = "MODEL=/models/moonshotai/Kimi-K2.5\nHF_TOKEN=hf_assembledSecret8888888888\n"


def unit_cat(unit: str) -> str:
    """`systemctl cat` of a unit: its fragment, naming the unit's environment files."""
    env = "".join(f"EnvironmentFile={path}\n" for path in ENV_FILES.get(unit, ()))
    return (
        f"# /etc/systemd/system/{unit}\n[Unit]\nDescription={unit}\n\n[Service]\n{env}"
        f"ExecStart=/opt/vllm/.venv/bin/vllm serve /models/x --port 8000\n"
    )


def healthy_sections(unit: str) -> dict[str, tuple[str, int]]:
    env = ENV_FILES.get(unit, ())
    show = SHOW_ACTIVE.replace(KIMI, unit)
    show += "".join(f"EnvironmentFiles={path} (ignore_errors=no)\n" for path in env)
    sections = {
        f"unit:{unit}": (show, 0),
        f"unitfile:{unit}": (f"{UNIT_SHA}  /etc/systemd/system/{unit}\n", 0),
        f"unitcat:{unit}": (unit_cat(unit), 0),
    }
    for path in env:
        digest = hashlib.sha256(ENV_TEXT.encode()).hexdigest()
        sections[f"envhash:{unit}:{path}"] = (f"{digest}  {path}\n", 0)
        sections[f"envfile:{unit}:{path}"] = (ENV_TEXT, 0)
    sections |= {
        f"health:{unit}": (http("", 200), 0),
        f"models:{unit}": (http(sample("vllm_models.json"), 200), 0),
        f"metrics:{unit}": (http(sample("vllm_metrics_dp2.txt"), 200), 0),
    }
    if JOURNAL_LINES.get(unit):
        sections[f"journal:{unit}"] = (sample("journal_short_iso.txt"), 0)
    sections[f"integrity:{unit}"] = (INTEGRITY_CLEAN, 0)
    return sections


def host_sections(
    units: list[str] = UNITS, **overrides: tuple[str, int]
) -> dict[str, tuple[str, int]]:
    sections = {
        "gpus": (sample("nvidia_smi_8x_h100.csv"), 0),
        "compute_apps": ("2314567, VLLM::EngineCore, 74560 MiB\n", 0),
        "processes": (PS_UNITS, 0),
        "gpu_details": (sample("nvidia_smi_details_8x_h100.csv"), 0),
        "nvidia_smi_version": (sample("nvidia_smi_version_580.txt"), 0),
        "gpu_topology": (sample("nvidia_smi_topo_8x_h100_nvlink.txt"), 0),
        "clock": ("1764576000\n", 0),
    }
    for unit in units:
        sections.update(healthy_sections(unit))
    sections.update(overrides)
    return sections


def assemble(sections: dict[str, tuple[str, int]]) -> str:
    return "".join(frame(name, out, status) for name, (out, status) in sections.items())


def stopped(unit: str) -> dict[str, tuple[str, int]]:
    return {
        f"unit:{unit}": (SHOW_STOPPED.replace(KIMI, unit), 0),
        f"health:{unit}": (http(CURL_REFUSED, 0), 7),
        f"models:{unit}": (http(CURL_REFUSED, 0), 7),
        f"metrics:{unit}": (http(CURL_REFUSED, 0), 7),
    }


# --- split_sections ------------------------------------------------------------------------


def test_split_sections_reads_every_section_of_the_real_probe_output() -> None:
    sections = split_sections(sample("probe_two_units.txt"))

    assert list(sections) == section_names(UNITS)
    assert sections["gpus"].output == sample("nvidia_smi_8x_h100.csv")
    assert sections[f"unitfile:{QWEN}"].exit_status == 1
    assert sections[f"health:{QWEN}"].exit_status == 7
    assert sections[f"integrity:{QWEN}"].exit_status == 127
    assert not any(s.truncated for s in sections.values())


def test_split_sections_ignores_banners_and_stray_lines() -> None:
    stdout = (
        "Welcome to Ubuntu 22.04.5 LTS\n * Documentation:  https://help.ubuntu.com\n"
        + frame("gpus", SMI_NO_DEVICES, 6)
        + "bash: warning: setlocale: LC_ALL: cannot change locale (en_US.UTF-8)\n"
        + frame("compute_apps", "", 0)
        + "logout\n"
    )

    assert split_sections(stdout) == {
        "gpus": Section("gpus", SMI_NO_DEVICES, 6, False),
        "compute_apps": Section("compute_apps", "", 0, False),
    }


def test_split_sections_marks_a_section_cut_mid_output_as_truncated() -> None:
    stdout = frame("gpus", SMI_NO_DEVICES, 6) + f"{MARK_BEGIN}unit:a.service\nId=a.service\nLoad"

    sections = split_sections(stdout)

    assert sections["gpus"].exit_status == 6
    assert sections["unit:a.service"] == Section("unit:a.service", "Id=a.service\nLoad", None, True)


@pytest.mark.parametrize("cut", ["@@cp:end:gpus:1", "@@cp:end:gpus:", "@@cp:end:g", "@"])
def test_split_sections_does_not_trust_an_end_marker_cut_mid_line(cut: str) -> None:
    """`...:1` may be `...:127` cut short: the status is unknown and the section truncated."""
    sections = split_sections(f"{MARK_BEGIN}gpus\n{SMI_DRIVER_FAILED}{cut}")

    assert sections["gpus"] == Section("gpus", SMI_DRIVER_FAILED, None, True)


def test_split_sections_drops_a_begin_marker_cut_mid_line() -> None:
    sections = split_sections(frame("gpus", "", 0) + f"{MARK_BEGIN}unit:vllm-ki")

    assert list(sections) == ["gpus"]


def test_split_sections_duplicate_section_last_wins() -> None:
    stdout = frame("gpus", "first\n", 0) + frame("gpus", "second\n", 9)

    assert split_sections(stdout)["gpus"] == Section("gpus", "second\n", 9, False)


def test_split_sections_finds_an_end_marker_after_output_without_newline() -> None:
    stdout = f"{MARK_BEGIN}unitfile:a.service\nno newline here{MARK_END}unitfile:a.service:0\n"

    assert split_sections(stdout)["unitfile:a.service"] == Section(
        "unitfile:a.service", "no newline here", 0, False
    )


def test_split_sections_a_new_begin_closes_an_unfinished_section_as_truncated() -> None:
    stdout = f"{MARK_BEGIN}gpus\npartial\n" + frame("compute_apps", "", 0)

    sections = split_sections(stdout)

    assert sections["gpus"] == Section("gpus", "partial\n", None, True)
    assert sections["compute_apps"].exit_status == 0


def test_split_sections_handles_crlf_and_empty_input() -> None:
    assert split_sections(frame("gpus", "x\n", 0).replace("\n", "\r\n")) == {
        "gpus": Section("gpus", "x\n", 0, False)
    }
    assert split_sections("") == {}


# --- nvidia-smi ----------------------------------------------------------------------------


def test_gpu_csv_of_a_healthy_8_gpu_host() -> None:
    gpus = parse_gpu_csv(sample("nvidia_smi_8x_h100.csv"))

    assert [g.index for g in gpus] == list(range(8))
    assert gpus[0] == GpuState(
        index=0,
        uuid="GPU-3f2b9c1e-8a4d-5e6f-9a0b-1c2d3e4f5a60",
        name="NVIDIA H100 80GB HBM3",
        memory_used_mib=74586,
        memory_total_mib=81559,
        power_draw_w=312.45,
        power_limit_w=700.0,
        utilization_pct=87,
        temperature_c=54,
    )
    assert len({g.uuid for g in gpus}) == 8


@pytest.mark.parametrize(
    "missing", ["[N/A]", "[Not Supported]", "[Unknown Error]", "[GPU is lost]", "N/A"]
)
def test_gpu_csv_unavailable_values_become_none(missing: str) -> None:
    line = f"3, GPU-c4d5e6f7, NVIDIA A100-SXM4-80GB, {missing}, 81920 MiB, {missing}, "
    line += f"{missing}, {missing}, {missing}\n"

    (gpu,) = parse_gpu_csv(line)

    assert gpu == GpuState(
        index=3, uuid="GPU-c4d5e6f7", name="NVIDIA A100-SXM4-80GB", memory_total_mib=81920
    )


def test_gpu_csv_nounits() -> None:
    text = "0, GPU-3f2b9c1e, NVIDIA H100 80GB HBM3, 74586, 81559, 312.45, 700.00, 87, 54\n"

    (gpu,) = parse_gpu_csv(text)

    assert (gpu.memory_used_mib, gpu.power_draw_w, gpu.utilization_pct) == (74586, 312.45, 87)


def test_gpu_csv_follows_the_given_column_order() -> None:
    fields = ("uuid", "temperature.gpu", "index", "memory.used")

    (gpu,) = parse_gpu_csv("GPU-aa, 41, 5, 1024 MiB\n", fields)

    assert gpu == GpuState(index=5, uuid="GPU-aa", temperature_c=41, memory_used_mib=1024)


def test_gpu_csv_no_devices_is_zero_gpus() -> None:
    assert parse_gpu_csv(SMI_NO_DEVICES) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (SMI_DRIVER_FAILED, SMI_DRIVER_FAILED.strip()),
        (SMI_NVML_MISMATCH, "Failed to initialize NVML: Driver/library version mismatch"),
        ("Failed to initialize NVML: Unknown Error\n", "Failed to initialize NVML: Unknown Error"),
        ("bash: line 1: nvidia-smi: command not found\n", "nvidia-smi: command not found"),
        ("", "nvidia-smi printed nothing"),
        ("\n \n", "nvidia-smi printed nothing"),
    ],
)
def test_gpu_csv_driver_failures_raise_with_the_first_line(text: str, message: str) -> None:
    with pytest.raises(ParseError) as raised:
        parse_gpu_csv(text)

    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_gpu_csv_wrong_column_count_is_an_error_not_a_crash() -> None:
    text = "0, GPU-3f2b9c1e, NVIDIA H100 80GB HBM3, 74586 MiB, 81559 MiB\n"

    with pytest.raises(ParseError, match="expected 9 columns, got 5"):
        parse_gpu_csv(text)


def test_gpu_csv_collects_bad_rows_and_keeps_the_good_ones_when_asked() -> None:
    lines = sample("nvidia_smi_8x_h100.csv").splitlines(keepends=True)
    text = "".join(lines[:3]) + SMI_GPU_LOST + "".join(lines[4:6]) + "7, GPU-e8f9, cut\n"
    problems: list[str] = []

    gpus = parse_gpu_csv(text, problems=problems)

    assert [g.index for g in gpus] == [0, 1, 2, 4, 5]
    assert problems == [
        f"line 4: {SMI_GPU_LOST.strip()}",
        "line 7: expected 9 columns, got 3: '7, GPU-e8f9, cut'",
    ]


def test_gpu_csv_with_only_bad_rows_raises_even_when_collecting() -> None:
    with pytest.raises(ParseError, match=r"GPU0000:CB:00\.0"):
        parse_gpu_csv(SMI_GPU_LOST, problems=[])


@pytest.mark.parametrize(
    "line",
    [
        "0, GPU-a, H100, 74586 GiB, 81559 MiB, 312.45 W, 700.00 W, 87 %, 54",  # wrong unit
        "0, GPU-a, H100, lots, 81559 MiB, 312.45 W, 700.00 W, 87 %, 54",
        "[N/A], GPU-a, H100, 1 MiB, 81559 MiB, 312.45 W, 700.00 W, 87 %, 54",  # no index
        "index, uuid, name, memory.used [MiB], memory.total [MiB], power.draw [W], "
        "power.limit [W], utilization.gpu [%], temperature.gpu",  # header
    ],
)
def test_gpu_csv_rejects_values_it_cannot_read(line: str) -> None:
    with pytest.raises(ParseError):
        parse_gpu_csv(line + "\n")


def test_compute_apps() -> None:
    text = (
        "2314567, VLLM::EngineCore, 74560 MiB\n"
        "2314890, /usr/bin/python3, [N/A]\n"
        "2315001, python -m vllm.entrypoints.openai.api_server, --a,b, 512 MiB\n"
    )

    assert parse_compute_apps(text) == [
        ComputeApp(2314567, "VLLM::EngineCore", 74560),
        ComputeApp(2314890, "/usr/bin/python3", None),
        ComputeApp(2315001, "python -m vllm.entrypoints.openai.api_server, --a,b", 512),
    ]


@pytest.mark.parametrize("text", ["", "\n", "No running processes found\n", SMI_NO_DEVICES])
def test_compute_apps_none_running(text: str) -> None:
    assert parse_compute_apps(text) == []


@pytest.mark.parametrize(
    "text", [SMI_DRIVER_FAILED, SMI_NVML_MISMATCH, "abc, python, 1 MiB\n", "123\n"]
)
def test_compute_apps_unreadable(text: str) -> None:
    with pytest.raises(ParseError):
        parse_compute_apps(text)


def test_compute_apps_with_the_gpu_uuid_column() -> None:
    text = (
        "2314567, VLLM::Worker_TP0, 74560 MiB, GPU-3f2b9c1e-8a4d-5e6f-9a0b-1c2d3e4f5a60\n"
        "2314890, python3, [N/A], [N/A]\n"
        "2315001, python -m x, --a,b, 512 MiB, GPU-7d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6\n"
    )

    assert parse_compute_apps(text) == [
        ComputeApp(2314567, "VLLM::Worker_TP0", 74560, "GPU-3f2b9c1e-8a4d-5e6f-9a0b-1c2d3e4f5a60"),
        ComputeApp(2314890, "python3", None, None),
        ComputeApp(2315001, "python -m x, --a,b", 512, "GPU-7d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6"),
    ]


def test_process_units() -> None:
    assert parse_process_units(PS_UNITS) == {
        1: "init.scope",
        2: None,
        812: "systemd-journald.service",
        2314567: "vllm-kimi-k25.service",
        2318001: "session-3.scope",
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n",
        'error: unknown user-defined format specifier "unit"\n',  # procps without systemd
        "ps: unrecognized option: o\nBusyBox v1.36.1 multi-call binary.\n",
        "    PID UNIT\n      1 init.scope\n",  # a header: the request was not `pid=,unit=`
        "  1 init.scope extra\n",
    ],
)
def test_process_units_unreadable(text: str) -> None:
    with pytest.raises(ParseError):
        parse_process_units(text)


def test_probe_names_the_unit_of_each_gpu_process() -> None:
    apps = "2314567, VLLM::Worker_TP0, 74560 MiB, GPU-x\n2318002, python3, 4096 MiB, GPU-x\n"
    ps = PS_UNITS + "2318002 session-3.scope\n"
    state = probe(assemble(host_sections(compute_apps=(apps, 0), processes=(ps, 0)))).state

    assert [(a.pid, a.unit) for a in state.compute_apps] == [
        (2314567, "vllm-kimi-k25.service"),
        (2318002, "session-3.scope"),
    ]
    assert state.problems == []


def test_probe_without_process_owners_is_partial() -> None:
    sections = host_sections(processes=("ps: unrecognized option: o\n", 1))
    state = probe(assemble(sections), integrity=True).state

    assert [p.section for p in state.problems] == ["processes"]
    assert state.compute_apps[0].unit is None


# --- systemctl, sha256sum ------------------------------------------------------------------


def test_systemctl_show_active_unit_in_any_order() -> None:
    assert parse_systemctl_show(SHOW_ACTIVE, KIMI) == UnitState(
        unit=KIMI,
        load_state="loaded",
        active_state="active",
        sub_state="running",
        main_pid=2314501,
        active_enter_timestamp="Tue 2025-11-04 09:12:44 UTC",
        n_restarts=2,
        fragment_path="/etc/systemd/system/vllm-kimi-k25.service",
    )


def test_systemctl_show_unit_that_does_not_exist_is_a_state() -> None:
    assert parse_systemctl_show(SHOW_NOT_FOUND, "nope.service") == UnitState(
        unit="nope.service",
        load_state="not-found",
        active_state="inactive",
        sub_state="dead",
        main_pid=0,
        n_restarts=0,
    )


def test_systemctl_show_values_may_contain_equals_and_warnings_are_skipped() -> None:
    text = (
        "Warning: The unit file, source configuration file or drop-ins of x.service changed on "
        "disk. Run 'systemctl daemon-reload' to reload units.\n"
        "FragmentPath=/etc/systemd/system/a=b.service\nMainPID=\nNRestarts=[not set]\n"
    )

    state = parse_systemctl_show(text, "x.service")

    assert state.fragment_path == "/etc/systemd/system/a=b.service"
    assert (state.main_pid, state.n_restarts, state.load_state) == (None, None, None)


@pytest.mark.parametrize(
    "text",
    [
        "Failed to get properties: Access denied\n",
        "System has not been booted with systemd as init system (PID 1). Can't operate.\n"
        "Failed to connect to bus: Host is down\n",
        "",
    ],
)
def test_systemctl_show_without_properties_raises(text: str) -> None:
    with pytest.raises(ParseError) as raised:
        parse_systemctl_show(text, "x.service")

    assert str(raised.value) == (text.splitlines()[0] if text else "systemctl printed nothing")


def test_systemctl_show_rejects_a_non_numeric_pid() -> None:
    with pytest.raises(ParseError, match="MainPID"):
        parse_systemctl_show("MainPID=abc\n", "x.service")


def test_sha256sum() -> None:
    assert parse_sha256sum(f"{UNIT_SHA}  /etc/systemd/system/{KIMI}\n") == UNIT_SHA
    assert parse_sha256sum(f"\\{UNIT_SHA.upper()}  /etc/systemd/system/a\\nb\n") == UNIT_SHA


@pytest.mark.parametrize(
    "text",
    [
        "sha256sum: /etc/systemd/system/x.service: No such file or directory\n",
        "sha256sum: can't open '/etc/systemd/system/x.service': No such file or directory\n",
    ],
)
def test_sha256sum_missing_file_is_none(text: str) -> None:
    assert parse_sha256sum(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "sha256sum: /etc/systemd/system/x.service: Permission denied\n",
        "",
        f"{UNIT_SHA[:40]}",
        f"{UNIT_SHA}  /a\n{UNIT_SHA}  /b\n",
    ],
)
def test_sha256sum_unreadable(text: str) -> None:
    with pytest.raises(ParseError):
        parse_sha256sum(text)


# --- HTTP ----------------------------------------------------------------------------------


@pytest.mark.parametrize("body", ["", '{"a": 1}', "line\n", "two\nlines\n\n"])
def test_http_body_comes_back_byte_exact(body: str) -> None:
    assert parse_http(http(body, 200)) == HttpResult(body, 200, None)


def test_http_000_carries_the_curl_error() -> None:
    result = parse_http(http(CURL_REFUSED, 0))

    assert result == HttpResult("", None, CURL_REFUSED.strip())


def test_http_non_200() -> None:
    body = '{"error": "Service Unavailable"}'
    assert parse_http(http(body, 503)) == HttpResult(body, 503, None)


def test_http_without_trailer_is_truncated() -> None:
    assert parse_http('{"object":"list","da') == HttpResult(
        '{"object":"list","da', None, "truncated"
    )


def test_http_partial_body_after_a_timeout_keeps_the_error() -> None:
    """curl's stderr is unbuffered, so its error comes before the buffered body (real order)."""
    error = (
        "curl: (28) Operation timed out after 5001 milliseconds with 14 out of 100 bytes received"
    )
    text = f'{error}\n{{"partial": tr\n@@cp:http:200\n'

    assert parse_http(text) == HttpResult('{"partial": tr', 200, error)


def test_http_error_after_the_body_is_found_too() -> None:
    error = "curl: (56) Recv failure: Connection reset by peer"

    assert parse_http(f"# HELP x\n{error}\n\n@@cp:http:200\n").error == error


def test_http_000_without_a_curl_message() -> None:
    assert parse_http(http("", 0)) == HttpResult("", None, "no HTTP response")


# --- /v1/models, /metrics ------------------------------------------------------------------


def test_models_json_vllm() -> None:
    assert parse_models_json(sample("vllm_models.json")) == (
        ["kimi-k2.5"],
        ["/models/moonshotai/Kimi-K2.5"],
        262144,
    )


def test_models_json_sglang_and_missing_fields() -> None:
    assert parse_models_json(MODELS_SGLANG) == (
        ["qwen3-235b"],
        ["Qwen/Qwen3-235B-A22B-Instruct-2507"],
        131072,
    )
    bare = '{"object":"list","data":[{"id":"default","object":"model","owned_by":"sglang"}]}'
    assert parse_models_json(bare) == (["default"], [], None)
    assert parse_models_json('{"object":"list","data":[]}') == ([], [], None)


def test_models_json_base_model_and_lora_adapter() -> None:
    body = (
        '{"object":"list","data":['
        '{"id":"kimi-k2.5","root":"/models/Kimi-K2.5","parent":null,"max_model_len":262144},'
        '{"id":"kimi-sql","root":"/adapters/sql","parent":"kimi-k2.5","max_model_len":null}]}'
    )

    assert parse_models_json(body) == (
        ["kimi-k2.5", "kimi-sql"],
        ["/models/Kimi-K2.5", "/adapters/sql"],
        262144,
    )


@pytest.mark.parametrize(
    "body",
    [
        "",
        "<html><body><h1>502 Bad Gateway</h1></body></html>",
        '{"object":"list","data":[{"id":"kimi',
        "[]",
        '{"object":"list"}',
        '{"data": {"id": "x"}}',
        '{"data": ["x"]}',
        '{"data": [{"id": 7}]}',
        '{"data": [{"id": "x", "max_model_len": "262144"}]}',
        '{"data": [{"id": "x", "max_model_len": true}]}',
        '{"data": [{"id": "x", "root": ["a"]}]}',
        "[" * 100_000,
    ],
)
def test_models_json_garbage_raises(body: str) -> None:
    with pytest.raises(ParseError):
        parse_models_json(body)


def test_vllm_metrics_sum_requests_over_engines_and_average_kv_cache() -> None:
    running, waiting, kv_cache = parse_vllm_metrics(sample("vllm_metrics_dp2.txt"))

    assert (running, waiting) == (5.0, 1.0)
    assert kv_cache == pytest.approx(0.35)


def test_vllm_metrics_agree_with_prometheus_client() -> None:
    parser = pytest.importorskip("prometheus_client.parser")
    values: dict[str, list[float]] = {}
    for family in parser.text_string_to_metric_families(sample("vllm_metrics_dp2.txt")):
        for s in family.samples:
            values.setdefault(s.name, []).append(s.value)

    running, waiting, kv_cache = parse_vllm_metrics(sample("vllm_metrics_dp2.txt"))

    assert running == sum(values["vllm:num_requests_running"])
    assert waiting == sum(values["vllm:num_requests_waiting"])
    kv = values["vllm:kv_cache_usage_perc"]
    assert kv_cache == pytest.approx(sum(kv) / len(kv))


def test_vllm_metrics_older_names_and_label_sets_of_several_models() -> None:
    text = """\
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="Qwen/Qwen2.5-Coder-32B-Instruct"} 4.0
vllm:num_requests_running{model_name="qwen-coder-lora"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="Qwen/Qwen2.5-Coder-32B-Instruct"} 7.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="Qwen/Qwen2.5-Coder-32B-Instruct"} 0.9
"""
    assert parse_vllm_metrics(text) == (5.0, 7.0, 0.9)


def test_vllm_metrics_prefers_the_newer_kv_cache_name() -> None:
    text = "vllm:gpu_cache_usage_perc 0.9\nvllm:kv_cache_usage_perc 0.5\n"

    assert parse_vllm_metrics(text)[2] == 0.5


def test_vllm_metrics_sglang_names() -> None:
    text = sample("sglang_metrics_dp2.txt")
    assert parse_vllm_metrics(text) == (22.0, 3.0, 0.375)


def test_vllm_metrics_skip_nan_and_inf() -> None:
    text = (
        'vllm:num_requests_running{engine="0"} NaN\n'
        'vllm:num_requests_running{engine="1"} 2.0\n'
        'vllm:num_requests_waiting{engine="0"} +Inf\n'
        'vllm:kv_cache_usage_perc{engine="0"} -Inf\n'
    )

    assert parse_vllm_metrics(text) == (2.0, None, None)


def test_vllm_metrics_missing_is_none() -> None:
    assert parse_vllm_metrics("") == (None, None, None)
    assert parse_vllm_metrics("# HELP vllm:num_requests_running x\n") == (None, None, None)
    assert parse_vllm_metrics("<html>404 Not Found</html>\n") == (None, None, None)


def test_vllm_metrics_labels_with_spaces_braces_quotes_and_a_timestamp() -> None:
    text = (
        'vllm:num_requests_running{model_name="my model {v2} \\"best\\""} 3 1762247564000\n'
        "vllm:num_requests_running  4.0\n"
    )

    assert parse_vllm_metrics(text)[0] == 7.0


@pytest.mark.parametrize(
    "line",
    [
        'vllm:num_requests_running{engine="0",model_name="kimi-k2.5"}',
        'vllm:num_requests_running{engine="0",model_na',
        'vllm:num_requests_waiting{engine="0"} three',
    ],
)
def test_vllm_metrics_malformed_line_of_a_used_metric_raises(line: str) -> None:
    with pytest.raises(ParseError, match="malformed metric line"):
        parse_vllm_metrics(f"vllm:num_requests_running 1.0\n{line}\n")


def test_vllm_metrics_malformed_line_of_another_metric_is_skipped() -> None:
    text = 'vllm:num_requests_running 1.0\nweird line { without value\nfoo_bar{a="b\n'

    assert parse_vllm_metrics(text) == (1.0, None, None)


# --- integrity -----------------------------------------------------------------------------


def test_integrity_clean() -> None:
    report = parse_integrity(INTEGRITY_CLEAN)

    assert report == IntegrityReport(dist="vllm", version="0.11.2", checked=1873)
    assert report.clean


def test_integrity_modified() -> None:
    report = parse_integrity(INTEGRITY_MODIFIED)

    assert report.modified == ["vllm/entrypoints/openai/api_server.py"]
    assert report.missing == ["vllm/_C.abi3.so"]
    assert report.added == ["vllm/sitecustomize.py"]
    assert not report.clean and report.error is None


def test_integrity_distribution_not_installed() -> None:
    report = parse_integrity('{"error": "distribution not installed", "dist": "vllm"}\n')

    assert report == IntegrityReport(dist="vllm", error="distribution not installed")


def test_integrity_after_warnings() -> None:
    text = "<string>:3: DeprecationWarning: something old\n" + INTEGRITY_CLEAN

    assert parse_integrity(text).checked == 1873


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            INTEGRITY_TRACEBACK,
            "PermissionError: [Errno 13] Permission denied: "
            "'/opt/vllm/lib/python3.12/site-packages/vllm/x.py'",
        ),
        (
            "bash: line 14: /opt/vllm/bin/python: No such file or directory\n",
            "bash: line 14: /opt/vllm/bin/python: No such file or directory",
        ),
        ("", "no output"),
        ('{"dist": "vllm", "version": "0.11.2", "checked": 18', '{"dist": "vllm", "version": '),
        ('{"dist": "vllm", "version": "0.11.2"}', "lacks dist, version or checked"),
        (
            '{"dist": "vllm", "version": "1", "checked": 1, "modified": "x"}',
            "'modified' is not a list",
        ),
        ('{"dist": "vllm", "version": "1", "checked": true}', "'checked' is not a count"),
    ],
)
def test_integrity_unreadable_output_is_a_report_with_an_error(text: str, error: str) -> None:
    report = parse_integrity(text)

    assert report.error is not None and error in report.error
    assert not report.clean


# --- the whole probe -----------------------------------------------------------------------


def test_probe_of_the_real_two_unit_output() -> None:
    parsed = probe(sample("probe_two_units.txt"), integrity=True)
    state = parsed.state

    assert len(state.gpus) == 8 and state.gpus[7].index == 7
    assert state.compute_apps == [
        ComputeApp(
            2314567,
            "VLLM::EngineCore",
            74560,
            "GPU-3f2b9c1e-8a4d-5e6f-9a0b-1c2d3e4f5a60",
            "vllm-kimi-k25.service",
        )
    ]
    kimi, qwen = state.deployments[KIMI], state.deployments[QWEN]
    assert (kimi.unit.active_state, kimi.unit.main_pid) == ("active", 2314501)
    assert kimi.unit_file_sha256 == UNIT_SHA
    assert kimi.server.healthy and kimi.server.health_http_status == 200
    assert kimi.server.models == ["kimi-k2.5"]
    assert kimi.server.model_roots == ["/models/moonshotai/Kimi-K2.5"]
    assert kimi.server.max_model_len == 262144
    assert (kimi.server.requests_running, kimi.server.requests_waiting) == (5.0, 1.0)
    assert kimi.integrity is not None and kimi.integrity.clean
    # The second unit does not exist: a state, not a problem.
    assert (qwen.unit.load_state, qwen.unit.main_pid, qwen.unit_file_sha256) == (
        "not-found",
        0,
        None,
    )
    assert not qwen.server.healthy and qwen.server.health_http_status is None
    assert qwen.server.models == [] and qwen.server.requests_running is None
    # ...but an engine interpreter that is not there means integrity could not be read.
    message = "bash: line 14: /opt/sglang/bin/python: No such file or directory"
    assert state.problems == [Problem(f"integrity:{QWEN}", message)]
    assert qwen.integrity is not None and qwen.integrity.error == message
    # What an engineer reads with systemctl status, cat, journalctl and nvidia-smi -q.
    assert (kimi.unit.memory_current_bytes, kimi.unit.tasks_current) == (198453219328, 967)
    assert kimi.unit.drop_in_paths == [f"/etc/systemd/system/{KIMI}.d/override.conf"]
    assert [f.path for f in kimi.unit_files] == [
        f"/etc/systemd/system/{KIMI}",
        *kimi.unit.drop_in_paths,
    ]
    assert kimi.unit_files[0].sha256 == UNIT_SHA  # sha256sum's, of the real bytes
    assert [(e.path, e.optional, e.missing) for e in kimi.environment_files] == [
        ("/etc/vllm/kimi-k25.env", False, False),
        ("/etc/vllm/common.env", True, True),
    ]
    assert kimi.environment_files[0].variables == {
        "MODEL": "/models/moonshotai/Kimi-K2.5",
        "SERVED_MODEL_NAME": "kimi-k2.5",
        "HF_TOKEN": "<redacted>",
    }
    assert kimi.journal is None and qwen.journal == [] and qwen.unit_files == []
    assert (state.driver_version, state.cuda_version) == ("580.95.05", "13.0")
    assert state.topology is not None and state.topology.nvlink
    assert [d.clock_event_reason_names for d in state.gpu_details][3] == ["SW power cap"]
    # The secret is nowhere in what is kept: parsed state or the sections stored as raw.
    assert "hf_probeSampleSecret" in sample("probe_two_units.txt")
    assert "hf_probeSampleSecret" not in repr(state.to_json())
    assert "hf_probeSampleSecret" not in repr([s.output for s in parsed.sections.values()])
    assert list(parsed.sections) == section_names(UNITS)
    assert parse_http(parsed.sections[f"models:{KIMI}"].output).body == sample("vllm_models.json")
    assert state.to_json()["deployments"][KIMI]["server"]["kv_cache_usage"] == pytest.approx(0.35)


def test_probe_of_assembled_healthy_output_has_no_problems() -> None:
    state = probe(assemble(host_sections()), integrity=True).state

    assert state.problems == []
    assert all(d.server.healthy for d in state.deployments.values())


def test_probe_with_nothing_printed_reports_every_section_missing() -> None:
    state = probe("", integrity=True).state

    assert state.problems == [Problem(name, NO_OUTPUT) for name in section_names(UNITS)]
    assert state.gpus == [] and set(state.deployments) == set(UNITS)
    assert state.deployments[KIMI].unit == UnitState(unit=KIMI)


def test_probe_cut_short_in_the_middle_of_a_section() -> None:
    full = assemble(host_sections())
    cut = full[: full.index('vllm:kv_cache_usage_perc{engine="1"')]  # inside metrics of KIMI

    state = probe(cut, integrity=True).state

    names = section_names(UNITS)
    after = names[names.index(f"metrics:{KIMI}") + 1 :]
    assert state.problems == [
        Problem(f"metrics:{KIMI}", "output cut short (no end marker)"),
        *(Problem(name, NO_OUTPUT) for name in after),
    ]
    kimi = state.deployments[KIMI]
    assert len(state.gpus) == 8 and kimi.server.models == ["kimi-k2.5"]
    assert kimi.server.requests_running is None and kimi.server.kv_cache_usage is None
    assert kimi.integrity is None


def test_probe_stopped_unit_is_not_a_problem() -> None:
    state = probe(assemble(host_sections(**stopped(QWEN))), integrity=True).state

    assert state.problems == []
    qwen = state.deployments[QWEN]
    assert qwen.unit.active_state == "inactive" and qwen.unit.main_pid == 0
    assert not qwen.server.healthy and qwen.server.health_http_status is None
    assert qwen.server.health_error == CURL_REFUSED.strip()  # read as a port nobody listens on
    assert qwen.server.models == [] and qwen.server.kv_cache_usage is None


def test_probe_active_but_not_serving_server_is_not_a_problem() -> None:
    overrides = {
        f"health:{KIMI}": (http("", 503), 0),
        f"models:{KIMI}": (http('{"detail":"Not Found"}', 404), 0),
        f"metrics:{KIMI}": (http(CURL_REFUSED, 0), 7),
    }

    state = probe(assemble(host_sections(**overrides)), integrity=True).state

    assert state.problems == []
    kimi = state.deployments[KIMI]
    assert kimi.unit.active_state == "active"
    assert (kimi.server.healthy, kimi.server.health_http_status) == (False, 503)
    assert kimi.server.health_error is None  # it answered
    assert kimi.server.models == [] and kimi.server.requests_running is None


@pytest.mark.parametrize(
    ("text", "status", "message"),
    [
        (SMI_DRIVER_FAILED, 9, SMI_DRIVER_FAILED.strip()),
        (SMI_NVML_MISMATCH, 18, "Failed to initialize NVML: Driver/library version mismatch"),
        ("bash: line 1: nvidia-smi: command not found\n", 127, "bash: line 1: nvidia-smi: command"),
    ],
)
def test_probe_driver_failure(text: str, status: int, message: str) -> None:
    sections = host_sections(gpus=(text, status), compute_apps=(text, status))

    state = probe(assemble(sections), integrity=True).state

    assert [p.section for p in state.problems] == ["gpus", "compute_apps"]
    assert state.problems[0].message.startswith(message)
    assert state.gpus == [] and state.compute_apps == []
    assert state.deployments[KIMI].server.healthy  # the rest of the probe still counts


def test_probe_no_devices_is_zero_gpus_without_a_problem() -> None:
    sections = host_sections(gpus=(SMI_NO_DEVICES, 6), compute_apps=(SMI_NO_DEVICES, 6))

    state = probe(assemble(sections), integrity=True).state

    assert state.problems == [] and state.gpus == [] and state.compute_apps == []


def test_probe_lost_gpu_keeps_the_others_and_reports_the_line() -> None:
    lines = sample("nvidia_smi_8x_h100.csv").splitlines(keepends=True)
    text = "".join(lines[:3]) + SMI_GPU_LOST + "".join(lines[4:])

    state = probe(assemble(host_sections(gpus=(text, 15))), integrity=True).state

    assert [g.index for g in state.gpus] == [0, 1, 2, 4, 5, 6, 7]
    assert state.problems == [Problem("gpus", f"line 4: {SMI_GPU_LOST.strip()}")]


def test_probe_unexplained_non_zero_exit_is_a_problem() -> None:
    sections = host_sections(compute_apps=("", 2))

    state = probe(assemble(sections), integrity=True).state

    assert state.problems == [Problem("compute_apps", "nvidia-smi exited with status 2")]


def test_probe_systemctl_access_denied() -> None:
    sections = host_sections(**{f"unit:{KIMI}": ("Failed to get properties: Access denied\n", 1)})

    state = probe(assemble(sections), integrity=True).state

    assert state.problems == [Problem(f"unit:{KIMI}", "Failed to get properties: Access denied")]
    assert state.deployments[KIMI].unit == UnitState(unit=KIMI)


def test_probe_unit_file_unreadable_is_a_problem_but_missing_is_not() -> None:
    sections = host_sections(
        **{
            f"unitfile:{KIMI}": (f"sha256sum: /etc/systemd/system/{KIMI}: Permission denied\n", 1),
            f"unitfile:{QWEN}": (
                f"sha256sum: /etc/systemd/system/{QWEN}: No such file or directory\n",
                1,
            ),
        }
    )

    state = probe(assemble(sections), integrity=True).state

    assert [p.section for p in state.problems] == [f"unitfile:{KIMI}"]
    assert "Permission denied" in state.problems[0].message
    assert state.deployments[QWEN].unit_file_sha256 is None


def test_probe_garbage_from_a_200_is_a_problem() -> None:
    sections = host_sections(
        **{
            f"models:{KIMI}": (http("<html>oops</html>", 200), 0),
            f"metrics:{KIMI}": (http("vllm:num_requests_running{engine=", 200), 0),
        }
    )

    state = probe(assemble(sections), integrity=True).state

    assert [p.section for p in state.problems] == [f"models:{KIMI}", f"metrics:{KIMI}"]
    assert "not JSON" in state.problems[0].message
    assert "malformed metric line" in state.problems[1].message
    assert state.deployments[KIMI].server.models == []


def test_probe_200_whose_transfer_failed_is_a_problem() -> None:
    error = (
        "curl: (28) Operation timed out after 5001 milliseconds with 100 out of 900 bytes received"
    )
    sections = host_sections(
        **{f"metrics:{KIMI}": (f"{error}\n# HELP vllm:x\n@@cp:http:200\n", 28)}
    )

    state = probe(assemble(sections), integrity=True).state

    assert state.problems == [Problem(f"metrics:{KIMI}", f"incomplete response: {error}")]
    assert state.deployments[KIMI].server.requests_running is None


def test_probe_curl_missing_is_a_problem() -> None:
    sections = host_sections(**{f"health:{KIMI}": ("bash: line 5: curl: command not found\n", 127)})

    state = probe(assemble(sections), integrity=True).state

    assert state.problems == [
        Problem(f"health:{KIMI}", "no HTTP status in output: bash: line 5: curl: command not found")
    ]
    assert not state.deployments[KIMI].server.healthy


def test_probe_integrity_findings_are_not_problems() -> None:
    sections = host_sections(
        **{
            f"integrity:{KIMI}": (INTEGRITY_MODIFIED, 0),
            f"integrity:{QWEN}": ('{"error": "distribution not installed", "dist": "vllm"}\n', 3),
        }
    )

    state = probe(assemble(sections), integrity=True).state

    assert state.problems == []
    kimi, qwen = state.deployments[KIMI].integrity, state.deployments[QWEN].integrity
    assert kimi is not None and kimi.modified == ["vllm/entrypoints/openai/api_server.py"]
    assert qwen is not None and qwen.error == "distribution not installed"


def test_probe_integrity_traceback_is_a_problem_with_the_report_kept() -> None:
    sections = host_sections(**{f"integrity:{KIMI}": (INTEGRITY_TRACEBACK, 1)})

    state = probe(assemble(sections), integrity=True).state

    assert [p.section for p in state.problems] == [f"integrity:{KIMI}"]
    assert state.problems[0].message.startswith("PermissionError: [Errno 13]")
    report = state.deployments[KIMI].integrity
    assert report is not None and report.error == state.problems[0].message


def test_probe_without_integrity_ignores_those_sections() -> None:
    sections = {k: v for k, v in host_sections().items() if not k.startswith("integrity:")}

    state = probe(assemble(sections), integrity=False).state

    assert state.problems == []
    assert all(d.integrity is None for d in state.deployments.values())


def test_probe_integrity_for_some_units_only() -> None:
    """The probe skips integrity for a server without an engine interpreter."""
    sections = {k: v for k, v in host_sections().items() if k != f"integrity:{QWEN}"}

    state = probe(assemble(sections), integrity=[KIMI]).state

    assert state.problems == []
    assert state.deployments[KIMI].integrity is not None
    assert state.deployments[QWEN].integrity is None


def test_probe_problem_messages_are_bounded() -> None:
    sections = host_sections(**{f"unit:{KIMI}": ("x" * 10_000 + "\n", 1)})

    state = probe(assemble(sections), integrity=True).state

    assert len(state.problems) == 1 and len(state.problems[0].message) <= 300


# --- never raises: every prefix of real output ---------------------------------------------


def _defaults_or_equal(part: Any, full: Any, default: Any, path: str) -> None:
    """Each leaf of a prefix parse is either the full parse's value or the empty default."""
    if isinstance(full, dict) and isinstance(part, dict):
        for key in full:
            sub_default = default.get(key) if isinstance(default, dict) else None
            _defaults_or_equal(part.get(key), full[key], sub_default, f"{path}.{key}")
        return
    assert part in (full, default), f"{path}: {part!r} is neither {full!r} nor {default!r}"


def _environment_files_read_or_not(part: dict[str, Any], full: dict[str, Any]) -> None:
    """Each environment file of a prefix parse was read whole (as in the full parse) or not
    at all (path and optional only); then it is taken out for `_defaults_or_equal`."""
    entries = part.pop("environment_files")
    full_entries = full["environment_files"]
    assert entries == [] or len(entries) == len(full_entries)
    for entry, whole in zip(entries, full_entries, strict=False):
        unread = {**whole, "sha256": None, "variables": {}, "missing": False}
        assert entry in (whole, unread), f"{entry!r} is half of {whole!r}"
    part["environment_files"] = full_entries


def _check_prefix(prefix: str, full: str, full_json: dict[str, Any]) -> None:
    """A cut never raises, never yields a value the full output does not, never goes unseen."""
    parsed = probe(prefix, integrity=True)
    state = parsed.state.to_json()
    assert not [p for p in parsed.state.problems if "parser failed" in p.message]
    assert state["gpus"] in ([], full_json["gpus"])
    # A cut before the `processes` section leaves the owners unknown, never wrong.
    owners_unknown = [{**app, "unit": None} for app in full_json["compute_apps"]]
    assert state["compute_apps"] in ([], full_json["compute_apps"], owners_unknown)
    for unit in UNITS:
        empty = asdict(DeploymentState(unit=UnitState(unit=unit)))
        part, whole = state["deployments"][unit], full_json["deployments"][unit]
        _environment_files_read_or_not(part, whole)
        _defaults_or_equal(part, whole, empty, unit)
    assert {p.section for p in parsed.state.problems} <= set(section_names(UNITS))
    if len(prefix) < len(full):
        assert parsed.state.problems, f"a cut at {len(prefix)} went unnoticed"


@pytest.mark.parametrize("name", ["real", "assembled"])
def test_probe_never_raises_on_any_prefix_of_valid_output(name: str) -> None:
    full = sample("probe_two_units.txt") if name == "real" else assemble(host_sections())
    full_json = probe(full, integrity=True).state.to_json()
    rng = random.Random(0)
    line_ends = [i + 1 for i, ch in enumerate(full) if ch == "\n"]
    cuts = sorted({*rng.sample(range(len(full)), 400), *line_ends, *(e - 1 for e in line_ends)})

    for cut in cuts:
        _check_prefix(full[:cut], full, full_json)


def test_probe_never_raises_on_shuffled_dropped_and_garbled_lines() -> None:
    """Not a prefix, so values may be wrong; but it must still come back with Problems."""
    lines = assemble(host_sections(**stopped(QWEN))).splitlines(keepends=True)
    rng = random.Random(0)
    junk = ["\n", "@@cp:end:gpus:0\n", "@@cp:begin:gpus\n", "@@cp:http:000\n", "\x00\xff\n", "{"]

    for _ in range(300):
        mutated = list(lines)
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(mutated))
            action = rng.choice(["drop", "dup", "junk", "swap", "chop"])
            if action == "drop":
                del mutated[i]
            elif action == "dup":
                mutated.insert(i, mutated[i])
            elif action == "junk":
                mutated.insert(i, rng.choice(junk))
            elif action == "swap":
                j = rng.randrange(len(mutated))
                mutated[i], mutated[j] = mutated[j], mutated[i]
            else:
                mutated[i] = mutated[i][: rng.randrange(len(mutated[i]) + 1)]
        parsed = probe("".join(mutated), integrity=True)
        assert not [p for p in parsed.state.problems if "parser failed" in p.message]
        # A garbled EnvironmentFile= line names some other file, which is then "not read".
        sections = {p.section for p in parsed.state.problems}
        assert {s for s in sections if not s.startswith(f"envfile:{KIMI}:")} <= set(
            section_names(UNITS)
        )
        assert set(parsed.state.deployments) == set(UNITS)


@pytest.mark.parametrize(
    ("output", "status", "expected", "problem"),
    [
        ("1764576000\n", 0, 1764576000, None),
        ("", 0, None, "not a time in seconds: no output"),
        ("Mon Dec  1 06:00:00 UTC 2026\n", 0, None, "not a time in seconds: Mon Dec"),
        ("[N/A]\n", 0, None, "not a time in seconds: [N/A]"),
        ("bash: date: command not found\n", 127, None, "not a time in seconds: bash: date"),
    ],
)
def test_the_hosts_clock(output: str, status: int, expected: int | None, problem: str | None):
    state = probe(assemble(host_sections(clock=(output, status))), integrity=True).state
    assert state.host_time == expected
    found = [p.message for p in state.problems if p.section == "clock"]
    assert found[0].startswith(problem) if problem else found == [], found
