"""The probe's parity sections (systemctl cat, environment files, journal, nvidia-smi details,
version and topology): built from validated parts, read-only, and only when asked for."""

from __future__ import annotations

import shlex

import pytest

from hosts import commands, probe_sections
from hosts.commands import ProbeSpec, ServerSpec

UNIT = "vllm-kimi-k25.service"
ENV = "/etc/vllm/kimi-k25.env"


def sections(**server: object) -> dict[str, list[str]]:
    spec = ProbeSpec(servers=(ServerSpec(UNIT, 8000, **server),))  # type: ignore[arg-type]
    return dict(probe_sections.probe_sections(spec))


def test_every_probe_reads_the_unit_files_and_the_gpu_details_version_and_topology() -> None:
    found = sections()

    assert found["unitcat:vllm-kimi-k25.service"] == ["systemctl", "cat", "--no-pager", UNIT]
    assert found["gpu_details"] == [
        "nvidia-smi",
        "--query-gpu=index,driver_version,pstate,persistence_mode,"
        "ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,clocks.sm,"
        "clocks.mem,clocks.max.sm,clocks_event_reasons.active,pcie.link.gen.current,"
        "pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max",
        "--format=csv,noheader",
    ]
    assert found["nvidia_smi_version"] == ["nvidia-smi", "--version"]
    assert found["gpu_topology"] == ["nvidia-smi", "topo", "-m"]
    # The original GPU query is unchanged, so old snapshots and the fit check read the same.
    assert found["gpus"] == commands.gpu_query()
    assert not any(name.startswith(("envfile:", "envhash:", "journal:")) for name in found)


def test_unit_show_asks_for_what_systemctl_status_shows() -> None:
    properties = commands.unit_show(UNIT)[-1].split(",")

    for wanted in (
        "ExecMainStartTimestamp",
        "Result",
        "MemoryCurrent",
        "MemoryPeak",
        "CPUUsageNSec",
        "TasksCurrent",
        "DropInPaths",
        "NeedDaemonReload",
        "UnitFileState",
        "ControlGroup",
        "ExecMainPID",
        "ExecMainStatus",
        "ExecMainCode",
        "EnvironmentFiles",
        "FragmentPath",
        "ActiveEnterTimestamp",
        "NRestarts",
    ):
        assert wanted in properties


def test_environment_files_are_hashed_then_read_with_cat_after_the_unit() -> None:
    names = list(sections(environment_files=(ENV, "/etc/vllm/common.env", ENV)))

    assert names[names.index(f"unitcat:{UNIT}") + 1 :][:4] == [
        f"envhash:{UNIT}:{ENV}",
        f"envfile:{UNIT}:{ENV}",
        f"envhash:{UNIT}:/etc/vllm/common.env",
        f"envfile:{UNIT}:/etc/vllm/common.env",
    ]
    found = sections(environment_files=(ENV,))
    assert found[f"envhash:{UNIT}:{ENV}"] == ["sha256sum", "--", ENV]
    assert found[f"envfile:{UNIT}:{ENV}"] == ["cat", "--", ENV]


@pytest.mark.parametrize(
    "path", ["/etc/vllm/$(id).env", "relative.env", "-/etc/x.env", "/etc/a b.env", "/etc/*.env"]
)
def test_environment_file_paths_are_validated(path: str) -> None:
    with pytest.raises(commands.UnsafeCommand):
        sections(environment_files=(path,))


def test_the_number_of_environment_files_is_bounded() -> None:
    many = tuple(f"/etc/vllm/{n}.env" for n in range(commands.MAX_ENVIRONMENT_FILES + 1))

    with pytest.raises(commands.UnsafeCommand):
        sections(environment_files=many)


def test_the_journal_tail_is_read_only_bounded_and_asked_for() -> None:
    assert sections(journal_lines=30)[f"journal:{UNIT}"] == [
        "journalctl",
        "-u",
        UNIT,
        "-n",
        "30",
        "--no-pager",
        "-o",
        "short-iso",
    ]
    assert commands.unit_journal_tail(UNIT, 5) == commands.unit_journal_tail(UNIT, 5)
    for bad in (0, -1, commands.JOURNAL_MAX_LINES + 1, True, "50"):
        with pytest.raises(commands.UnsafeCommand):
            commands.unit_journal_tail(UNIT, bad)  # type: ignore[arg-type]
    with pytest.raises(commands.UnsafeCommand):
        commands.unit_journal_tail("$(reboot).service", 5)


def test_the_probe_script_quotes_every_new_part() -> None:
    spec = ProbeSpec(servers=(ServerSpec(UNIT, 8000, environment_files=(ENV,), journal_lines=9),))
    script = probe_sections.probe_script(spec)

    for line in script.splitlines():
        words = shlex.split(line)
        assert words[0] == "echo"
    assert f"sha256sum -- {ENV} 2>&1" in script
    assert f"cat -- {ENV} 2>&1" in script
    assert "journalctl -u vllm-kimi-k25.service -n 9 --no-pager -o short-iso 2>&1" in script
    assert "nvidia-smi topo -m 2>&1" in script
