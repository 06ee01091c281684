"""The whole probe (hosts/parsers/probe.py): every section read into one HostState, whatever
is unreadable a Problem, and no output, however cut or garbled, that makes it raise.

The samples and helpers shared with the other parser tests are in parser_samples.py.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict
from typing import Any

import pytest

from hosts.parsers import (
    NO_OUTPUT,
    ProbeParse,
    parse_http,
    parse_probe,
)
from hosts.state import (
    ComputeApp,
    DeploymentState,
    HostState,
    Problem,
    UnitState,
)
from tests.hosts.parser_samples import (
    CURL_REFUSED,
    ENV_FILES,
    INTEGRITY_CLEAN,
    INTEGRITY_MODIFIED,
    INTEGRITY_TRACEBACK,
    JOURNAL_LINES,
    KIMI,
    PS_UNITS,
    QWEN,
    SHOW_ACTIVE,
    SMI_DRIVER_FAILED,
    SMI_GPU_LOST,
    SMI_NO_DEVICES,
    SMI_NVML_MISMATCH,
    UNIT_SHA,
    UNITS,
    frame,
    gpu_fault_sections,
    http,
    sample,
    section_names,
)


def probe(stdout: str, units: list[str] = UNITS, *, integrity: Any = True) -> ProbeParse:
    """parse_probe as hosts.probe calls it for the spec of section_names()."""
    return parse_probe(
        stdout,
        units,
        integrity=integrity,
        environment_files=ENV_FILES,
        journal_lines=JOURNAL_LINES,
    )


SHOW_STOPPED = (
    SHOW_ACTIVE.replace("ActiveState=active", "ActiveState=inactive")
    .replace("SubState=running", "SubState=dead")
    .replace("MainPID=2314501", "MainPID=0")
)
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
        **gpu_fault_sections(),
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


# --- GPU processes named by their units -------------------------------------------------


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


def test_every_host_section_has_a_reader_and_fills_a_state_field():
    """A section declared without a reader (or a reader left for a removed section) would
    make every probe raise or read nothing: the declaration and the readers stay one set."""
    from dataclasses import fields

    from hosts import probe_sections
    from hosts.parsers.probe import HOST_READERS

    declared = [s.name for s in probe_sections.HOST_SECTIONS]
    assert len(set(declared)) == len(declared)
    assert set(HOST_READERS) == set(declared)
    state_fields = {f.name for f in fields(HostState)}
    assert {s.fills for s in probe_sections.HOST_SECTIONS} <= state_fields
    prefixes = [s.prefix for s in probe_sections.UNIT_SECTIONS]
    assert len(set(prefixes)) == len(prefixes)
    assert not set(prefixes) & set(declared)
