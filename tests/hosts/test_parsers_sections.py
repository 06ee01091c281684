"""`split_sections`: the probe's output cut into its framed sections (hosts/parsers/sections.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# --- the marker search against the line-by-line reading it replaced -------------------------

_END_STATUS = re.compile(r"([0-9]{1,3})")


def _split_line_by_line(stdout: str) -> dict[str, Section]:
    """split_sections as it was until 2026-12-05: every line looked at in turn."""

    def end_marker_status(line: str, name: str) -> tuple[str, int] | None:
        marker = f"{MARK_END}{name}:"
        pos = line.rfind(marker)
        if pos < 0:
            return None
        match = _END_STATUS.fullmatch(line[pos + len(marker) :])
        if not match or int(match.group(1)) > 255:
            return None
        return line[:pos], int(match.group(1))

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
            continue
        ended = end_marker_status(piece, name) if complete else None
        if ended is not None:
            before, status = ended
            sections[name] = Section(name, "".join(output) + before, status, False)
            name, output = None, []
            continue
        if not complete and (f"{MARK_END}{name}:".startswith(piece) or MARK_END in piece):
            break
        output.append(piece + "\n" if complete else piece)
    if name is not None:
        sections[name] = Section(name, "".join(output), None, True)
    return sections


_NAMES = ["gpus", "unit:a.service", "g", ""]
_PIECES = st.one_of(
    st.sampled_from(["\n", "\r\n", "\r", "x", " ", "@@cp:", "@@cp:http:200", "@", ":"]),
    st.builds(lambda n: f"{MARK_BEGIN}{n}", st.sampled_from(_NAMES)),
    st.builds(
        lambda n, s: f"{MARK_END}{n}:{s}",
        st.sampled_from(_NAMES),
        st.sampled_from(["0", "1", "127", "255", "256", "1000", "", "x", "12"]),
    ),
    st.text(alphabet="ab:@\n0123456789", max_size=12),
)


@settings(max_examples=3000, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_split_sections_reads_any_output_as_the_line_by_line_reading_did(stdout: str) -> None:
    assert split_sections(stdout) == _split_line_by_line(stdout)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=len(sample("probe_two_units.txt"))))
def test_split_sections_reads_a_real_probe_cut_anywhere_as_before(cut: int) -> None:
    stdout = sample("probe_two_units.txt")[:cut]

    assert split_sections(stdout) == _split_line_by_line(stdout)
