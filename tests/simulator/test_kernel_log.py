"""The kernel's log on a simulated host: Xid lines as GPU faults go on, `journalctl -k` and its
filters, kept apart from the units' journals, and read under the probe's sudoers line."""

from __future__ import annotations

from simulator import catalog
from tests.simulator.on_machine import XIDS, host, kernel, stamp

UNIT = catalog.DEFAULT_UNIT


def test_an_xid_is_written_once_when_the_fault_goes_on_and_stays() -> None:
    h = host()
    h.machine.set_fault("gpu_fell_off_bus")
    h.advance(30)
    h.machine.set_fault("gpu_fell_off_bus")  # already on: nothing new happened
    h.machine.set_fault("gpu_fell_off_bus", False)
    assert len(h.out(XIDS)) == 1
    h.advance(30)
    assert h.out("simctl fault gpu_fell_off_bus on") == ["gpu-01: fault gpu_fell_off_bus on"]
    assert len(h.out(XIDS)) == 2
    assert h.out("journalctl -k -n 1 -o short-iso")[0].startswith(stamp(60) + " gpu-01 kernel: ")


def test_journalctl_keeps_kernel_and_unit_messages_apart() -> None:
    h = host()
    h.machine.set_fault("gpu_fell_off_bus")
    h.machine.set_fault("ecc_uncorrectable")
    unit = h.out(f"journalctl -u {UNIT} -o cat")
    assert unit and not any("NVRM" in line for line in unit)
    assert all("NVRM: Xid" in line for line in h.out("journalctl -k -o cat"))
    assert h.out("journalctl -k -o cat -n 1")[0].startswith("NVRM: Xid (PCI:0000:3a:00): 48, ")
    short = h.out("journalctl -k --grep 'fallen off'")
    assert short == [
        "Sep 21 14:13:20 gpu-01 kernel: NVRM: Xid (PCI:0000:5d:00): 79, pid=0, GPU has fallen "
        "off the bus."
    ]
    everything = h.out("journalctl -o short-iso -n 3")
    assert everything[-2:] == [kernel(m) for m in h.out("journalctl -k -o cat")]
    assert h.out("journalctl -k -o cat --grep 'nvrm: xid'") == h.out("journalctl -k -o cat")
    assert h.run("journalctl -k -o cat --grep 'nvrm: Xid'") == ("-- No entries --\n", "", 0)
    assert h.run("journalctl -k -q -g 'NVRM: XID'") == ("", "", 0)  # upper case: case-sensitive
    assert len(h.out("journalctl -k -g 'nvrm: XID' --case-sensitive=no")) == 2
    assert h.run(f"journalctl -u {UNIT} -q --grep NVRM") == ("", "", 0)
    assert h.run("journalctl -k -b -1") == (
        "",
        "Data from the specified boot (-1) is not available: No such boot ID in journal\n",
        1,
    )
    assert h.out("journalctl -k -b 0 -o cat") == h.out("journalctl -k --boot -o cat")


def test_the_probes_journal_read_is_allowed_by_its_sudoers_line() -> None:
    h = host()
    h.machine.write_file(
        "/etc/sudoers.d/controlplane",
        f"deploy ALL=(root) NOPASSWD: /usr/bin/journalctl -u {UNIT} *, /usr/bin/journalctl -k *\n",
    )
    h.machine.set_fault("gpu_fell_off_bus")
    stdout, stderr, status = h.run(f"sudo -n {XIDS}", username="deploy")
    assert (stderr, status) == ("", 0)
    assert (
        stdout
        == kernel("NVRM: Xid (PCI:0000:5d:00): 79, pid=0, GPU has fallen off the bus.") + "\n"
    )
    refused = h.run("sudo -n journalctl -u ssh.service -n 5", username="deploy")
    assert refused == ("", "sudo: a password is required\n", 1)
