"""The GPU fault parsers (hosts.parsers.gpu_faults) against real captures
(tests/hosts/samples/PROVENANCE.md) and the outputs drivers print when things go wrong."""

from __future__ import annotations

import pytest

from hosts.parsers.common import ParseError
from hosts.parsers.gpu_faults import (
    parse_gpu_errors,
    parse_lost_gpus,
    parse_nvlink_errors,
    parse_nvlink_status,
    parse_remapped_rows,
    parse_xid_journal,
    pci_key,
)
from hosts.state import HostState

from .parser_samples import (
    H100_BUS_IDS,
    gpu_error_rows,
    h100_uuids,
    nvlink_errors,
    nvlink_status,
    remapped_row_rows,
    sample,
    xid_line,
)
from .test_parsers_probe import assemble, host_sections, probe

MISMATCH = (
    "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95"
)
LOST_LINE = (
    "Unable to determine the device handle for GPU0000:5D:00.0: GPU is lost.  "
    "Reboot the system to recover this GPU"
)


# --- gpu_errors ----------------------------------------------------------------------------


def test_gpu_errors_rows_with_counters_and_not_available_values() -> None:
    text = (
        "0, 00000000:18:00.0, 0, [N/A], Disabled\n"
        "1, 00000000:2A:00.0, 3, [N/A], Enabled\n"
        "2, 00000000:3A:00.0, [N/A], No, [N/A]\n"
        "3, 00000000:5D:00.0, [Not Supported], Yes, [Not Supported]\n"
    )
    rows = parse_gpu_errors(text)
    assert [r.index for r in rows] == [0, 1, 2, 3]
    assert rows[1].ecc_uncorrected_aggregate == 3
    assert rows[0].pci_bus_id == "00000000:18:00.0"
    assert rows[2].ecc_uncorrected_aggregate is None and rows[2].retired_pages_pending is False
    assert rows[3].ecc_uncorrected_aggregate is None and rows[3].retired_pages_pending is True
    assert [r.mig_mode for r in rows] == [False, True, None, None]


def test_gpu_errors_keep_good_rows_beside_a_lost_gpu() -> None:
    good = "00000000:18:00.0, 0, [N/A], Disabled"
    text = f"0, {good}\n{LOST_LINE}\n2, {good}\n"
    problems: list[str] = []
    rows = parse_gpu_errors(text, problems=problems)
    assert [r.index for r in rows] == [0, 2]
    assert problems and "GPU is lost" in problems[0]


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "printed nothing"),
        (MISMATCH, "Driver/library version mismatch"),
        ("0, 00000000:18:00.0, 0\n", "expected 5 columns"),  # cut short
        ("0, 00000000:18:00.0, many, No, Disabled\n", "not a number"),
        ("0, 00000000:18:00.0, 0, Maybe, Disabled\n", "not yes or no"),
    ],
)
def test_gpu_errors_that_cannot_be_read_raise(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_gpu_errors(text)


# --- remapped rows -------------------------------------------------------------------------


def test_remapped_rows_name_their_gpu_by_uuid() -> None:
    text = "GPU-aaaa, 0, 0, 0, 0\nGPU-bbbb, 2, 1, 1, 0\nGPU-cccc, 0, 0, No, Yes\n"
    rows = parse_remapped_rows(text)
    assert [r.uuid for r in rows] == ["GPU-aaaa", "GPU-bbbb", "GPU-cccc"]
    assert (rows[1].remapped_rows_uncorrectable, rows[1].remap_pending) == (1, True)
    assert rows[2].remap_failure is True and rows[2].remap_pending is False


def test_remapped_rows_of_gddr_boards_are_unknown_not_zero() -> None:
    (row,) = parse_remapped_rows("GPU-aaaa, [N/A], [N/A], [N/A], [N/A]\n")
    assert row.remap_pending is None and row.remapped_rows_uncorrectable is None


def test_a_driver_without_the_remapped_rows_query_answers_no_rows() -> None:
    usage = "\nInvalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
    assert parse_remapped_rows(usage) == []


def test_remapped_rows_driver_failure_raises() -> None:
    with pytest.raises(ParseError, match="mismatch"):
        parse_remapped_rows(MISMATCH)


# --- NVLink --------------------------------------------------------------------------------


def test_nvlink_status_of_eight_a100s() -> None:
    gpus = parse_nvlink_status(sample("nvidia_smi_nvlink_status_8x_a100.txt"))
    assert [g.index for g in gpus] == list(range(8))
    assert gpus[0].uuid == "GPU-5269b708-678a-b1a8-60f0-c90406537486"
    assert all(len(g.links) == 12 and not g.inactive for g in gpus)
    assert gpus[7].links[11].speed_gbps == 25.0


def test_a_board_without_nvlink_prints_nothing() -> None:
    assert parse_nvlink_status(sample("nvidia_smi_nvlink_status_a10_no_nvlink.txt")) == []


def test_an_inactive_link_is_named() -> None:
    text = (
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1111)\n"
        "\t Link 3: 26.562 GB/s\n\t Link 4: <inactive>\n\t Link 5: 26.562 GB/s\n"
    )
    (gpu,) = parse_nvlink_status(text)
    assert gpu.inactive == [4]
    assert gpu.links[0].speed_gbps == 26.562


def test_nvlink_error_counters_of_a_gb300() -> None:
    counters = parse_nvlink_errors(sample("nvidia_smi_nvlink_errors_gb300.txt"))
    assert counters == {0: {0: {"replay_errors": 0, "recovery_errors": 0, "crc_errors": 0}}}


def test_nvlink_error_counters_unknown_and_new_names() -> None:
    text = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0000)\n"
        "\t Link 0: Replay Errors: 12\n\t Link 0: Recovery Errors: N/A\n"
        "\t Link 0: CRC Errors: 7\n\t Link 0: Effective Errors: 3\n"
    )
    assert parse_nvlink_errors(text) == {
        0: {0: {"replay_errors": 12, "recovery_errors": None, "crc_errors": 7}}
    }


@pytest.mark.parametrize(
    "text, message",
    [
        (MISMATCH, "mismatch"),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "failed"),
        ("GPU 0: NVIDIA H100 (UUID: GPU-0)\n\t Link 0: 26.5", "not a speed"),  # cut short
        ("\t Link 0: 26.562 GB/s\n", "not an NVLink line"),  # no GPU header
    ],
)
def test_nvlink_output_that_cannot_be_read_raises(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_nvlink_status(text)


# --- the kernel log ------------------------------------------------------------------------


def test_xids_from_dmesg_with_the_drivers_stack_lines_between() -> None:
    events = parse_xid_journal(sample("dmesg_xid_119_gsp_timeout.txt"))
    assert len(events) >= 3 and {e.code for e in events} == {119}
    assert events[0].pci == "0000:9b:00"
    assert events[0].message.startswith("pid=2024380, name=nvidia-smi, Timeout after 6s")


def test_xids_after_nvlink_faults_on_four_gpus() -> None:
    events = parse_xid_journal(sample("journal_kernel_xid_45_after_149.txt"))
    assert [(e.code, e.pci) for e in events] == [
        (45, "0000:dc:00"),
        (45, "0000:ed:00"),
        (45, "0000:ba:00"),
        (45, "0000:97:00"),
    ]


def test_xid_in_the_journals_short_iso_format_keeps_its_time() -> None:
    line = (
        "2026-12-03T10:15:02+00:00 gpu-01 kernel: NVRM: Xid (PCI:0000:5d:00): 79, pid=0, "
        "GPU has fallen off the bus.\n"
    )
    (event,) = parse_xid_journal(line)
    assert (event.code, event.at) == (79, "2026-12-03T10:15:02+00:00")
    assert event.message == "pid=0, GPU has fallen off the bus."


@pytest.mark.parametrize(
    "text", ["", "-- No entries --\n", "2026-12-03T10:15 gpu-01 kernel: NVRM: X"]
)
def test_no_xids(text: str) -> None:
    assert parse_xid_journal(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "No journal files were opened due to insufficient permissions.\n",
        "Hint: You are currently not seeing messages from other users and the system.\n",
        "Compiled without pattern matching support\n",
    ],
)
def test_a_kernel_log_that_may_not_be_read_raises(text: str) -> None:
    with pytest.raises(ParseError):
        parse_xid_journal(text)


def test_pci_names_agree_between_nvidia_smi_and_the_kernel() -> None:
    assert pci_key("00000000:5D:00.0") == pci_key("0000:5d:00") == "0000:5d:00"


# --- lost GPUs -----------------------------------------------------------------------------


def test_lost_gpus_from_the_device_handle_line_and_from_values() -> None:
    text = (
        "0, GPU-0, NVIDIA H100 80GB HBM3, 1 MiB, 81559 MiB, 70.00 W, 700.00 W, 0 %, 30\n"
        f"{LOST_LINE}\n"
        "4, [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost], "
        "[N/A], [N/A], [N/A], [N/A]\n"
        "5, GPU-5, NVIDIA H100 80GB HBM3, ERR!, 81559 MiB, 70.00 W, 700.00 W, 0 %, 30\n"
    )
    lost = parse_lost_gpus(text)
    assert [(g.pci_bus_id, g.index) for g in lost] == [
        ("0000:5D:00.0", None),
        (None, 4),
        (None, 5),
    ]
    assert lost[0].message.startswith("GPU is lost")
    assert lost[2].message == "ERR!"


def test_no_lost_gpus_in_a_healthy_answer() -> None:
    assert parse_lost_gpus(sample("nvidia_smi_8x_h100.csv")) == []


# --- the whole probe: each fact lands beside the GPU it concerns ---------------------------


def probe_with(**sections: tuple[str, int]) -> HostState:
    return probe(assemble(host_sections(**sections)), integrity=True).state


def test_a_healthy_probe_reads_every_gpu_fault_section_without_problems() -> None:
    state = probe_with()
    assert state.problems == []
    assert [e.index for e in state.gpu_errors] == list(range(8))
    assert state.gpu_errors[3].pci_bus_id == H100_BUS_IDS[3]
    assert state.gpu_errors[3].uuid == h100_uuids()[3]
    assert [len(g.links) for g in state.nvlinks] == [18] * 8
    assert state.xid_events == [] and state.lost_gpus == []


def test_an_xid_is_matched_to_its_gpu_by_pci_bus_id() -> None:
    log = xid_line(79, "5D", "pid=0, GPU has fallen off the bus.") + xid_line(13, "9A", "pid=9")
    state = probe_with(xid_events=(log, 0))
    assert [(e.code, e.gpu_index) for e in state.xid_events] == [(79, 3), (13, 4)]


def test_a_lost_gpu_is_named_by_the_gap_it_leaves_and_its_xid_follows_it() -> None:
    rows = sample("nvidia_smi_8x_h100.csv").splitlines(keepends=True)
    lost = f"{LOST_LINE}\n"
    errors = gpu_error_rows().splitlines(keepends=True)
    state = probe_with(
        gpus=("".join(rows[:3]) + lost + "".join(rows[4:]), 15),
        gpu_errors=("".join(errors[:3]) + lost + "".join(errors[4:]), 15),
        xid_events=(xid_line(79, "5D", "pid=0, GPU has fallen off the bus."), 0),
    )
    assert [(g.index, g.pci_bus_id) for g in state.lost_gpus] == [(3, "0000:5D:00.0")]
    assert state.xid_events[0].gpu_index == 3
    assert {p.section for p in state.problems} == {"gpus", "gpu_errors"}


def test_remapped_rows_and_nvlink_counters_land_on_their_gpus() -> None:
    state = probe_with(
        remapped_rows=(remapped_row_rows({5: "0, 1, 1, 0"}), 0),
        nvlink_status=(nvlink_status({1: 4}), 0),
        nvlink_errors=(nvlink_errors({(1, 4): 7}), 0),
    )
    remapped = state.gpu_errors[5]
    assert (remapped.remapped_rows_uncorrectable, remapped.remap_pending) == (1, True)
    assert state.nvlinks[1].inactive == [4]
    link = state.nvlinks[1].links[4]
    assert (link.replay_errors, link.crc_errors, link.recovery_errors) == (7, 7, 0)
    assert state.problems == []


def test_a_host_without_nvlink_or_row_remapping_has_none_and_no_problem() -> None:
    gddr = "".join(f"{u}, [N/A], [N/A], [N/A], [N/A]\n" for u in h100_uuids())
    state = probe_with(nvlink_status=("", 0), nvlink_errors=("", 0), remapped_rows=(gddr, 0))
    assert state.nvlinks == [] and state.problems == []
    assert all(e.remap_pending is None for e in state.gpu_errors)


@pytest.mark.parametrize(
    "section, output, status",
    [
        ("nvlink_status", MISMATCH, 18),
        ("nvlink_errors", "GPU 0: NVIDIA H100 (UUID: GPU-0)\n\t Link 0: Replay", 0),
        ("xid_events", "No journal files were opened due to insufficient permissions.\n", 1),
        ("remapped_rows", MISMATCH, 18),
        ("gpu_errors", "", 0),
    ],
)
def test_an_unreadable_gpu_fault_section_is_a_problem_and_loses_nothing_else(
    section: str, output: str, status: int
) -> None:
    state = probe_with(**{section: (output, status)})
    assert [p.section for p in state.problems] == [section]
    assert len(state.gpus) == 8


def test_journalctl_that_matched_nothing_and_exited_1_is_not_a_problem() -> None:
    assert probe_with(xid_events=("", 1)).problems == []
