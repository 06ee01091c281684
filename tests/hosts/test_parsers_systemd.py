"""`systemctl show` with the properties of `systemctl status`, and `systemctl cat` of a unit
with drop-ins: real-format samples in tests/hosts/samples/."""

from __future__ import annotations

from pathlib import Path

import pytest

from hosts.parsers import (
    ParseError,
    environment_file_names,
    parse_sha256sum,
    parse_systemctl_cat,
    parse_systemctl_show,
    redact_unit_text,
)
from hosts.state import UnitState
from tests.hosts.parser_samples import KIMI, SHOW_ACTIVE, UNIT_SHA

SAMPLES = Path(__file__).parent / "samples"
UNIT = "vllm-kimi-k25.service"
FRAGMENT = f"/etc/systemd/system/{UNIT}"
DROP_IN = f"/etc/systemd/system/{UNIT}.d/override.conf"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def test_show_of_a_running_unit_reads_what_systemctl_status_shows() -> None:
    state = parse_systemctl_show(sample("systemctl_show_running.txt"), UNIT)

    assert state == UnitState(
        unit=UNIT,
        load_state="loaded",
        active_state="active",
        sub_state="running",
        main_pid=2314501,
        active_enter_timestamp="Tue 2025-11-04 09:12:44 UTC",
        n_restarts=0,
        fragment_path=FRAGMENT,
        result="success",
        exec_main_start_timestamp="Tue 2025-11-04 09:12:44 UTC",
        exec_main_pid=2314501,
        exec_main_code=0,
        exec_main_status=0,
        memory_current_bytes=198453219328,
        memory_peak_bytes=205521367040,
        cpu_usage_nsec=8123456789012,
        tasks_current=967,
        control_group=f"/system.slice/{UNIT}",
        drop_in_paths=[DROP_IN],
        unit_file_state="enabled",
        need_daemon_reload=False,
        environment_files=["/etc/vllm/kimi-k25.env", "-/etc/vllm/common.env"],
    )


def test_show_of_a_unit_that_could_not_start_has_no_counters() -> None:
    state = parse_systemctl_show(sample("systemctl_show_failed_resources.txt"), UNIT)

    assert (state.active_state, state.result, state.n_restarts) == ("failed", "resources", 5)
    # `[not set]`, and 2^64-1 from systemd versions that print the raw "no value"
    assert state.memory_current_bytes is None and state.memory_peak_bytes is None
    assert state.cpu_usage_nsec is None and state.tasks_current is None
    assert state.exec_main_start_timestamp is None and state.control_group is None
    assert state.need_daemon_reload is True and state.drop_in_paths == []


def test_show_of_a_crashed_unit_keeps_its_last_main_process() -> None:
    state = parse_systemctl_show(sample("systemctl_show_crashed.txt"), UNIT)

    assert (state.active_state, state.sub_state) == ("activating", "auto-restart")
    assert (state.exec_main_pid, state.exec_main_code, state.exec_main_status) == (2391177, 1, 1)
    assert state.main_pid == 0 and state.unit_file_state == "disabled"
    assert len(state.drop_in_paths) == 2 and state.environment_files == []


def test_show_of_a_missing_unit_is_a_state() -> None:
    state = parse_systemctl_show(sample("systemctl_show_not_found.txt"), "sglang-qwen3.service")

    assert state.load_state == "not-found" and state.unit_file_state is None
    assert state.memory_current_bytes is None and state.fragment_path is None


def test_show_of_an_older_systemd_without_the_new_properties() -> None:
    text = "Id=x.service\nLoadState=loaded\nActiveState=active\nSubState=running\nMainPID=7\n"

    state = parse_systemctl_show(text, "x.service")

    assert state.main_pid == 7 and state.memory_peak_bytes is None and state.drop_in_paths == []


@pytest.mark.parametrize(
    "line",
    [
        "MemoryCurrent=12G",
        "CPUUsageNSec=-1",
        "NeedDaemonReload=maybe",
        "EnvironmentFiles=/etc/x.env",
        "EnvironmentFiles=/etc/x.env (ignore_errors=perhaps)",
        "ExecMainCode=exited",
    ],
)
def test_show_rejects_values_it_cannot_read(line: str) -> None:
    with pytest.raises(ParseError):
        parse_systemctl_show(f"Id={UNIT}\nLoadState=loaded\n{line}\n", UNIT)


# --- systemctl cat -------------------------------------------------------------------------


def test_cat_splits_where_systemctl_show_says_the_files_are() -> None:
    files = parse_systemctl_cat(sample("systemctl_cat_with_dropin.txt"), [FRAGMENT, DROP_IN])

    assert [path for path, _ in files] == [FRAGMENT, DROP_IN]
    fragment, drop_in = (text for _, text in files)
    assert fragment.startswith("[Unit]\n") and fragment.endswith("WantedBy=multi-user.target\n")
    # A comment that looks like a header is part of the drop-in, not a third file.
    assert drop_in.startswith("[Service]\n# /etc/systemd/system/vllm-kimi-k25.service.d/not-a")
    assert drop_in.endswith("VLLM_LOGGING_LEVEL=DEBUG\n")


def test_cat_without_show_finds_headers_after_empty_lines_only() -> None:
    files = parse_systemctl_cat(sample("systemctl_cat_with_dropin.txt"))

    assert [path for path, _ in files] == [FRAGMENT, DROP_IN]


def test_cat_keeps_each_file_byte_for_byte() -> None:
    text = f"# {FRAGMENT}\n[Service]\nExecStart=/bin/true\n\n\n# {DROP_IN}\nno newline at end"

    files = parse_systemctl_cat(text, [FRAGMENT, DROP_IN])

    assert files == [
        (FRAGMENT, "[Service]\nExecStart=/bin/true\n\n"),
        (DROP_IN, "no newline at end"),
    ]


def test_cat_of_a_unit_changed_on_disk_skips_systemctls_warning() -> None:
    files = parse_systemctl_cat(sample("systemctl_cat_changed_on_disk.txt"), [FRAGMENT])

    assert files[0][1].startswith("[Unit]\nDescription=vLLM server kimi-k2.5 (controlplane rev")


def test_cat_of_a_missing_unit_is_no_files() -> None:
    assert parse_systemctl_cat(sample("systemctl_cat_not_found.txt"), None) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", [FRAGMENT]),
        ("Failed to connect to bus: No such file or directory\n", [FRAGMENT]),
        (f"# {FRAGMENT}\n[Unit]\n", [FRAGMENT, DROP_IN]),  # a drop-in missing: cut short
        (f"Environment=HF_TOKEN=hf_s3cret\n# {FRAGMENT}\n[Unit]\n", [FRAGMENT]),
        ("Environment=HF_TOKEN=hf_s3cret\n", None),
    ],
)
def test_cat_that_is_not_what_systemctl_prints_raises(
    text: str, expected: list[str] | None
) -> None:
    with pytest.raises(ParseError) as error:
        parse_systemctl_cat(text, expected)
    assert "hf_s3cret" not in str(error.value)  # a problem never quotes a secret


def test_environment_file_names_follow_systemds_list_rules() -> None:
    fragment = "[Service]\nEnvironmentFile=/etc/a.env\nEnvironmentFile=-/etc/b.env\n"
    reset = "[Service]\nEnvironmentFile=\nEnvironmentFile=/etc/c.env\n"
    other_section = "[Unit]\nEnvironmentFile=/etc/ignored.env\n"

    assert environment_file_names([fragment]) == ["/etc/a.env", "-/etc/b.env"]
    assert environment_file_names([fragment, reset, other_section]) == ["/etc/c.env"]


def test_secrets_in_a_unit_file_are_redacted_and_the_rest_kept() -> None:
    redacted = redact_unit_text(sample("systemctl_cat_with_dropin.txt"))

    assert "hf_unitFileSecret" not in redacted
    assert "Environment=HF_TOKEN=<redacted> VLLM_LOGGING_LEVEL=DEBUG" in redacted
    assert "Environment=VLLM_USE_V1=1\n" in redacted
    assert "ExecStart=/opt/vllm/.venv/bin/vllm serve ${MODEL}" in redacted


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("Environment=API_KEY=abc OK=1", "Environment=API_KEY=<redacted> OK=1"),
        ('Environment="PASSWORD=a b" "X=1"', 'Environment=PASSWORD=<redacted> "X=1"'),
        ("Environment=TOKEN='unterminated", "Environment=<redacted>"),
        ("Environment=X=1 \\\n  HF_TOKEN=abc", "Environment=X=1 \\\n  HF_TOKEN=<redacted>"),
        (
            "ExecStart=/v serve m --api-key sk-1 --port 1",
            "ExecStart=/v serve m --api-key <redacted> --port 1",
        ),
        ("ExecStart=/v serve m --hf-token=hf_1", "ExecStart=/v serve m --hf-token=<redacted>"),
        (
            "ExecStart=/v serve m --max-num-batched-tokens 8192",
            "ExecStart=/v serve m --max-num-batched-tokens 8192",
        ),
    ],
)
def test_unit_redaction_cases(line: str, shown: str) -> None:
    assert redact_unit_text(line + "\n") == shown + "\n"


# --- systemctl show of the probe's sample units, sha256sum --------------------------------

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
