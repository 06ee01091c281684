"""What the verdict says about each GPU and engine fault a probe can see, and why: one table.

deployments.gpu_faults and deployments.health find the facts; the level of each comes from
here, and docs/reference/verdicts.md's "What the verdict says about GPU and engine faults" is
this table in prose (tests/deployments/test_verdict_table.py keeps the two in step and has a
case per row).
A row whose level is None is shown on the host page and weighed nowhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from hosts.choices import Verdict

FAILED, DEGRADED = Verdict.FAILED, Verdict.DEGRADED


@dataclass(frozen=True)
class Reason:
    level: str  # changing | degraded | unknown | failed
    code: str  # machine-readable, e.g. "engine_patched"
    text: str  # what a person reads

    def as_dict(self) -> dict[str, str]:
        return {"level": self.level, "code": self.code, "text": self.text}


@dataclass(frozen=True)
class Row:
    code: str
    level: str | None
    fact: str  # what the probe saw
    why: str  # the reason for the level


# Xids by what they leave behind (NVIDIA's catalog: "reset GPU", "restart the machine").
XID_FATAL = frozenset({48, 62, 64, 79, 94, 95, 109, 119, 120, 136, 140, 143, 155})
XID_WARNING = frozenset({63, 74, 92, 144, 145, 149, 150, 154})
XID_APPLICATION = frozenset({13, 31, 43, 45, 68, 69})  # the process's own fault

ROWS: tuple[Row, ...] = (
    Row("gpu_lost", FAILED, "nvidia-smi cannot reach a GPU (GPU is lost, Unknown Error, ERR!)",
        "the GPU does not answer its driver; nothing runs on it until the host is rebooted"),
    Row("xid_fatal", FAILED, "Xid 48, 62, 64, 79, 94, 95, 109, 119, 120, 136, 140, 143 or 155 "
        "this boot", "NVIDIA's catalog says the GPU needs a reset or the machine a restart; "
        "its results cannot be trusted until then"),
    Row("xid_reset_required", FAILED, "Xid 154 naming a reset or reboot",
        "the driver itself says the GPU must be reset or the node rebooted"),
    Row("xid_warning", DEGRADED, "Xid 63, 74, 92, 144, 145, 149, 150, or 154 without a reset",
        "memory is being remapped or NVLink is erring: it serves, but it is wearing or slow"),
    Row("xid_unknown", DEGRADED, "an Xid not in this table",
        "a driver newer than this table reported something; an engineer should read it"),
    Row("xid_application", None, "Xid 13, 31, 43, 45, 68 or 69",
        "an application's own fault (a bad kernel, a killed context): shown, not weighed"),
    Row("ecc_uncorrectable", FAILED, "uncorrectable ECC errors since the driver loaded",
        "data on the GPU was corrupted; whatever it computed since may be wrong"),
    Row("ecc_uncorrectable_lifetime", DEGRADED, "uncorrectable ECC errors in the board's "
        "lifetime, none since the driver loaded", "the board has failed before; watch it"),
    Row("row_remap_failure", FAILED, "a row remapping failed",
        "no spare memory row was left: the memory is bad and the board must be replaced"),
    Row("row_remap_pending", DEGRADED, "a row waits to be remapped",
        "the faulty row stays in use until the GPU is reset"),
    Row("retired_pages_pending", DEGRADED, "a memory page waits to be retired (before Ampere)",
        "the faulty page stays in use until the GPU is reset"),
    Row("nvlink_inactive", DEGRADED, "an NVLink link is inactive",
        "tensor-parallel traffic over that GPU slows or falls back to PCIe"),
    Row("nvlink_errors_rising", DEGRADED, "NVLink replay, recovery or CRC errors rose since "
        "the last probe", "a link that keeps erring retries its traffic and often fails soon"),
    Row("pcie_width_degraded", DEGRADED, "a PCIe link narrower than its maximum",
        "a link that trained down moves weights and activations at a fraction of its speed"),
    Row("pcie_gen_degraded", DEGRADED, "a PCIe link below its maximum generation while the "
        "GPU is busy", "idle GPUs lower their link speed to save power; a busy one should not"),
    Row("clock_slowdown", DEGRADED, "hardware or thermal slowdown in the clock event reasons",
        "the GPU is held below its clocks by heat or its power supply: every token is slower"),
    Row("persistence_off", DEGRADED, "persistence mode off",
        "the driver may unload between processes; the next start pays its initialisation"),
    Row("gpu_diagnostic_failed", FAILED, "DCGM's diagnostic, run on request, failed a test",
        "the GPU failed NVIDIA's own test of it; until a diagnostic passes it is not trusted"),
    Row("gpu_diagnostic_warning", DEGRADED, "DCGM's diagnostic warned on a test",
        "NVIDIA's test found something off that does not fail the GPU (persistence, a skip)"),
    Row("engine_dead", FAILED, "the unit is active and /health answers 503",
        "vLLM answers 503 once its engine core has died behind a live API server"),
    Row("engine_gone", FAILED, "the API answers, but no process of the unit holds GPU memory",
        "the engine core and its workers died; the API server alone serves nothing"),
    Row("engine_stalled", FAILED, "requests waiting, none running and no token generated "
        "across two probes", "the engine accepts requests and answers none of them"),
    Row("port_refused", FAILED, "the unit is active past its load time and its port refuses",
        "a server that does not listen after its model's load time is not loading"),
)  # fmt: skip

TABLE: dict[str, Row] = {row.code: row for row in ROWS}


def reason(code: str, text: str) -> Reason | None:
    """The verdict's reason for fact `code`, at the table's level; None where it is only shown."""
    level = TABLE[code].level
    return None if level is None else Reason(level, code, text)
