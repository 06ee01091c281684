"""`split_sections`: the probe's output cut into its framed sections (hosts/parsers/sections.py)."""

from __future__ import annotations

import pytest

from hosts.commands import MARK_BEGIN, MARK_END
from hosts.parsers import (
    Section,
    split_sections,
)
from tests.hosts.parser_samples import (
    QWEN,
    SMI_DRIVER_FAILED,
    SMI_NO_DEVICES,
    UNITS,
    frame,
    sample,
    section_names,
)


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
