"""The typed state of the parity sections: read back from stored JSON (old rows too), and what
of it counts as material when a decision is re-checked."""

from __future__ import annotations

from hosts.state import (
    DeploymentState,
    EnvironmentFile,
    GpuDetails,
    HostState,
    Topology,
    UnitFile,
    UnitState,
    fingerprint_drift,
    material_fingerprint,
)

UNIT = "vllm-kimi-k25.service"
FRAGMENT = f"/etc/systemd/system/{UNIT}"
DROP_IN = f"/etc/systemd/system/{UNIT}.d/override.conf"
ENV = "/etc/vllm/kimi-k25.env"


def full_state() -> HostState:
    return HostState(
        deployments={
            UNIT: DeploymentState(
                unit=UnitState(
                    unit=UNIT,
                    active_state="active",
                    main_pid=7,
                    memory_current_bytes=2**40,
                    drop_in_paths=[DROP_IN],
                    need_daemon_reload=False,
                    environment_files=[ENV],
                ),
                unit_file_sha256="a" * 64,
                unit_files=[
                    UnitFile(FRAGMENT, "[Unit]\n", "a" * 64),
                    UnitFile(DROP_IN, "", "b" * 64),
                ],
                environment_files=[EnvironmentFile(ENV, "c" * 64, {"MODEL": "m", "HF_TOKEN": "x"})],
                journal=["2025-11-04T11:02:01+00:00 host vllm[1]: hello"],
            )
        },
        gpu_details=[GpuDetails(index=0, clock_event_reasons=4, clock_event_reason_names=["SW"])],
        driver_version="580.95.05",
        cuda_version="13.0",
        topology=Topology(links=[["X"]], summary="one GPU", cpu_affinity=["0-47"]),
    )


def test_the_new_state_goes_through_json_and_back_unchanged() -> None:
    state = full_state()

    assert HostState.from_json(state.to_json()) == state


def test_a_snapshot_stored_before_these_fields_reads_with_their_defaults() -> None:
    old = {
        "gpus": [{"index": 0, "uuid": "GPU-1", "memory_used_mib": 10}],
        "compute_apps": [],
        "deployments": {
            UNIT: {
                "unit": {"unit": UNIT, "active_state": "active", "main_pid": 7},
                "unit_file_sha256": "a" * 64,
                "server": {"healthy": True, "models": ["kimi-k2.5"]},
                "integrity": None,
            }
        },
        "problems": [],
    }

    state = HostState.from_json(old)

    dep = state.deployments[UNIT]
    assert dep.unit.memory_current_bytes is None and dep.unit.drop_in_paths == []
    assert dep.unit_files == [] and dep.environment_files == [] and dep.journal is None
    assert state.gpu_details == [] and state.topology is None and state.cuda_version is None


def test_odd_stored_values_do_not_break_reading() -> None:
    odd = {
        "deployments": {
            UNIT: {"unit_files": [{"path": FRAGMENT}, "x"], "environment_files": [{}], "journal": 3}
        },
        "gpu_details": [{"driver_version": "580"}, None],
        "topology": "PCIe",
    }

    state = HostState.from_json(odd)

    dep = state.deployments[UNIT]
    assert dep.unit_files == [] and dep.environment_files == [] and dep.journal is None
    assert state.gpu_details == [] and state.topology is None


def test_drop_ins_and_environment_files_are_material_by_their_hashes() -> None:
    before = full_state()
    fingerprint = material_fingerprint(before)
    assert fingerprint[f"{UNIT}.drop_ins"] == [[DROP_IN, "b" * 64]]
    assert fingerprint[f"{UNIT}.environment_files"] == [[ENV, "c" * 64]]

    after = full_state()
    after.deployments[UNIT].unit_files[1].sha256 = "d" * 64
    after.deployments[UNIT].environment_files[0].sha256 = "e" * 64
    drift = fingerprint_drift(fingerprint, material_fingerprint(after))

    assert [d["field"] for d in drift] == [f"{UNIT}.drop_ins", f"{UNIT}.environment_files"]


def test_what_moves_all_the_time_is_not_material() -> None:
    before, after = full_state(), full_state()
    unit = after.deployments[UNIT].unit
    unit.memory_current_bytes, unit.cpu_usage_nsec, unit.tasks_current = 1, 2, 3
    after.deployments[UNIT].journal = ["another line"]
    after.gpu_details[0].clock_event_reasons = 1
    # A changed secret changes the file's hash, not the redacted variables the state keeps.
    after.deployments[UNIT].environment_files[0].variables = {"MODEL": "m", "HF_TOKEN": "y"}

    assert material_fingerprint(before) == material_fingerprint(after)
