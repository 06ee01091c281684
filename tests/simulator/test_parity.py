"""The simulator answers the probe's parity sections as real hosts do: systemctl show and cat
with drop-ins, EnvironmentFile= and ${VAR}, journalctl -o short-iso, nvidia-smi's details,
--version and topo -m, and the hand-written unit shape that serves a Hugging Face repo id."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

from hosts import commands, probe_sections
from hosts.commands import ProbeSpec, ServerSpec
from hosts.parsers import parse_probe
from simulator import catalog
from tests.fleet import FleetHandle

UNIT = catalog.DEFAULT_UNIT
FRAGMENT = f"/etc/systemd/system/{UNIT}"
DROP_IN_DIR = f"/etc/systemd/system/{UNIT}.d"
SAMPLES = Path(__file__).parents[1] / "hosts" / "samples"


def run(fleet: FleetHandle, argv: list[str], name: str = "gpu-01") -> tuple[str, str, int]:
    return fleet.run(name, commands.render(argv))


def show(fleet: FleetHandle, name: str = "gpu-01") -> dict[str, str]:
    out, _, status = run(fleet, commands.unit_show(UNIT), name)
    assert status == 0
    props: dict[str, str] = {}
    for line in out.splitlines():
        key, _, value = line.partition("=")
        props[key] = f"{props[key]}\n{value}" if key in props else value
    return props


def root(fleet: FleetHandle, command: str, name: str = "gpu-01") -> tuple[str, str, int]:
    return fleet.run(name, command, username="root")


def restart_and_wait(fleet: FleetHandle, phase: str = "ready") -> dict[str, object]:
    _, err, status = root(fleet, f"systemctl daemon-reload && systemctl restart --no-block {UNIT}")
    assert status == 0, err
    return fleet.wait_for_unit("gpu-01", UNIT, phase)


# --- systemctl show ------------------------------------------------------------------------


def test_show_has_the_cgroup_counters_and_they_grow_while_the_model_loads(
    make_fleet: Callable[..., FleetHandle],
) -> None:
    fleet = make_fleet(1, load_seconds=2.0, time_scale=1.0)
    serving = show(fleet)
    assert serving["ControlGroup"] == f"/system.slice/{UNIT}"
    assert int(serving["MemoryPeak"]) >= int(serving["MemoryCurrent"]) > 100 * 2**30
    assert int(serving["TasksCurrent"]) > 8 * 100 and int(serving["CPUUsageNSec"]) > 0
    assert serving["ExecMainPID"] == serving["MainPID"] and serving["Result"] == "success"

    root(fleet, f"systemctl restart --no-block {UNIT}")
    early = show(fleet)
    time.sleep(1.0)
    later = show(fleet)
    assert int(early["MemoryCurrent"]) < int(later["MemoryCurrent"]) < int(serving["MemoryCurrent"])
    assert int(early["CPUUsageNSec"]) < int(later["CPUUsageNSec"])

    root(fleet, f"systemctl stop --no-block {UNIT}")
    stopped = show(fleet)
    assert stopped["MemoryCurrent"] == stopped["TasksCurrent"] == "[not set]"
    assert stopped["ControlGroup"] == "" and stopped["MainPID"] == "0"
    # The last main process is kept: vLLM exits 0 on SIGTERM (code 1 = exited).
    assert stopped["ExecMainPID"] == later["MainPID"]
    assert (stopped["ExecMainCode"], stopped["ExecMainStatus"]) == ("1", "0")


def test_a_crash_leaves_its_exit_status_in_exec_main(sim_fleet: FleetHandle) -> None:
    pid = show(sim_fleet)["MainPID"]
    sim_fleet.crash_unit("gpu-01")
    props = show(sim_fleet)

    assert (props["ExecMainPID"], props["ExecMainCode"], props["ExecMainStatus"]) == (pid, "1", "1")
    assert props["Result"] == "exit-code" and props["ActiveState"] == "failed"


# --- drop-ins ------------------------------------------------------------------------------


def test_cat_prints_the_fragment_and_each_drop_in_as_systemd_loaded_them(
    sim_fleet: FleetHandle,
) -> None:
    sim_fleet.write_file("gpu-01", f"{DROP_IN_DIR}/20-env.conf", "[Service]\nEnvironment=A=1\n")
    sim_fleet.write_file("gpu-01", f"{DROP_IN_DIR}/10-restart.conf", "[Service]\nRestart=always\n")
    # Not loaded yet: systemctl cat warns (on stderr) and shows only what systemd loaded.
    out, err, status = sim_fleet.run("gpu-01", commands.join(commands.unit_cat(UNIT)))
    assert status == 0 and out.startswith(f"# {FRAGMENT}\n[Unit]\n")
    assert err.startswith(f"# Warning: {UNIT} changed on disk")
    assert show(sim_fleet)["NeedDaemonReload"] == "yes"

    sim_fleet.daemon_reload("gpu-01")
    out, err, status = sim_fleet.run("gpu-01", commands.join(commands.unit_cat(UNIT)))

    fragment = sim_fleet.state("gpu-01")["unit_files"][FRAGMENT]["content"]
    assert (err, status) == ("", 0)
    assert out == (
        f"# {FRAGMENT}\n{fragment}\n"
        f"# {DROP_IN_DIR}/10-restart.conf\n[Service]\nRestart=always\n\n"
        f"# {DROP_IN_DIR}/20-env.conf\n[Service]\nEnvironment=A=1\n"
    )
    props = show(sim_fleet)
    assert props["DropInPaths"] == f"{DROP_IN_DIR}/10-restart.conf {DROP_IN_DIR}/20-env.conf"
    assert props["NeedDaemonReload"] == "no"
    status_out = root(sim_fleet, f"systemctl status {UNIT}")[0]
    assert (
        f"    Drop-In: {DROP_IN_DIR}\n             └─10-restart.conf, 20-env.conf\n" in status_out
    )
    out, _, status = run(sim_fleet, commands.unit_cat("ghost.service"))
    assert (out, status) == ("No files found for ghost.service.\n", 1)


def test_a_drop_in_resets_exec_start_and_changes_what_serves(sim_fleet: FleetHandle) -> None:
    int4 = catalog.CATALOG[1]
    override = (
        "[Service]\nExecStart=\n"
        f"ExecStart={catalog.VLLM_BINARY} serve {int4.path} --served-model-name kimi-int4 "
        "--tensor-parallel-size 8 --port 8000\n"
    )
    sim_fleet.write_file("gpu-01", f"{DROP_IN_DIR}/override.conf", override)

    unit = restart_and_wait(sim_fleet)

    assert unit["model_path"] == int4.path and unit["served_names"] == ["kimi-int4"]
    assert unit["drop_in_paths"] == [f"{DROP_IN_DIR}/override.conf"]


def test_a_second_exec_start_without_a_reset_is_refused_like_systemd(
    sim_fleet: FleetHandle,
) -> None:
    sim_fleet.write_file("gpu-01", f"{DROP_IN_DIR}/bad.conf", "[Service]\nExecStart=/bin/sleep 1\n")
    sim_fleet.daemon_reload("gpu-01")

    _, err, status = root(sim_fleet, f"systemctl restart --no-block {UNIT}")

    assert status == 1 and "has a bad unit file setting" in err
    assert show(sim_fleet)["LoadState"] == "bad-setting"


def test_environment_from_a_drop_in_reaches_the_engine(sim_fleet: FleetHandle) -> None:
    sim_fleet.write_file(
        "gpu-01", f"{DROP_IN_DIR}/gpus.conf", "[Service]\nEnvironment=CUDA_VISIBLE_DEVICES=0,1,2\n"
    )

    unit = restart_and_wait(sim_fleet, "failed")

    assert unit["last_exit"] == {"failure": "world_size", "status": 1}
    journal = "\n".join(sim_fleet.journal("gpu-01"))
    assert "World size (8) is larger than the number of available GPUs (3)" in journal


# --- EnvironmentFile= and ${VAR} -----------------------------------------------------------


def test_the_envfile_shape_serves_the_repo_id_from_its_environment_file(
    make_fleet: Callable[..., FleetHandle],
) -> None:
    fleet = make_fleet(2, unit_styles={"gpu-01": "envfile"})

    unit = fleet.state("gpu-01")["units"][UNIT]
    assert unit["phase"] == "ready"
    assert unit["argv"][1:4] == ["serve", "nvidia/Kimi-K2.5-NVFP4", "--served-model-name"]
    assert unit["served_names"] == ["kimi-k2.5"]
    assert unit["environment_files"] == [[catalog.ENV_FILE, False]]
    assert set(unit["environment_keys"]) >= {"MODEL", "SERVED_MODEL_NAME", "HF_TOKEN"}
    out, _, _ = run(fleet, commands.http_get(8000, "/v1/models"))
    (card,) = json.loads(out.rsplit("\n@@cp:http:", 1)[0])["data"]
    assert (card["id"], card["root"]) == ("kimi-k2.5", "nvidia/Kimi-K2.5-NVFP4")
    props = show(fleet)
    assert props["EnvironmentFiles"] == f"{catalog.ENV_FILE} (ignore_errors=no)"
    out, _, status = run(fleet, commands.file_read(catalog.ENV_FILE))
    assert status == 0 and out == catalog.envfile_text()
    # The other host keeps the control plane's own shape.
    assert fleet.state("gpu-02")["units"][UNIT]["model_path"] == catalog.DEFAULT_MODEL.path


def test_a_missing_mandatory_environment_file_fails_the_start_with_resources(
    make_fleet: Callable[..., FleetHandle],
) -> None:
    fleet = make_fleet(1, unit_styles={"gpu-01": "envfile"})
    fleet.write_file("gpu-01", catalog.ENV_FILE, None)
    serving_pid = show(fleet)["MainPID"]

    root(fleet, f"systemctl restart --no-block {UNIT}")
    props = show(fleet)

    # Restart=on-failure counts 'resources' too: systemd will try again after RestartSec=.
    assert (props["ActiveState"], props["SubState"]) == ("activating", "auto-restart")
    # No process was spawned: ExecMainPID= still names the one that served before.
    assert (props["Result"], props["MainPID"]) == ("resources", "0")
    assert props["ExecMainPID"] == serving_pid
    journal = fleet.journal("gpu-01")[-4:]
    assert journal == [
        f"{UNIT}: Failed to load environment files: No such file or directory",
        f"{UNIT}: Failed to spawn 'start' task: No such file or directory",
        f"{UNIT}: Failed with result 'resources'.",
        f"Failed to start {UNIT} - vLLM Kimi-K2.5 NVFP4.",
    ]
    out, _, _ = run(fleet, commands.unit_journal_tail(UNIT, 2))
    assert re.fullmatch(
        r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00 gpu-01 systemd\[1\]: .*\n){2}", out
    ), out


def test_an_optional_missing_file_is_skipped_and_dollar_words_split(
    sim_fleet: FleetHandle,
) -> None:
    sim_fleet.write_file(
        "gpu-01", "/etc/vllm/extra.env", 'EXTRA="--max-num-seqs 8 --enforce-eager"\n'
    )
    sim_fleet.write_file(
        "gpu-01",
        f"{DROP_IN_DIR}/env.conf",
        "[Service]\nEnvironmentFile=-/etc/vllm/nope.env\nEnvironmentFile=/etc/vllm/extra.env\n"
        "Environment=NAME=kimi-env\nExecStart=\n"
        f"ExecStart={catalog.VLLM_BINARY} serve {catalog.DEFAULT_MODEL.path} "
        "--served-model-name ${NAME} $EXTRA $UNSET --tensor-parallel-size 8\n",
    )

    unit = restart_and_wait(sim_fleet)

    assert unit["argv"][-6:] == [
        "kimi-env",
        "--max-num-seqs",  # $EXTRA alone is split at whitespace
        "8",
        "--enforce-eager",
        "--tensor-parallel-size",  # $UNSET alone is no argument at all
        "8",
    ]
    assert unit["served_names"] == ["kimi-env"]


def test_a_repo_id_not_in_the_hf_cache_fails_like_an_offline_host(
    sim_fleet: FleetHandle,
) -> None:
    override = (
        "[Service]\nExecStart=\n"
        f"ExecStart={catalog.VLLM_BINARY} serve someone/not-cached --tensor-parallel-size 8\n"
    )
    sim_fleet.write_file("gpu-01", f"{DROP_IN_DIR}/override.conf", override)

    unit = restart_and_wait(sim_fleet, "failed")

    assert unit["last_exit"] == {"failure": "missing_model", "status": 1}
    assert any(
        "couldn't connect to 'https://huggingface.co'" in m for m in sim_fleet.journal("gpu-01")
    )


# --- nvidia-smi ----------------------------------------------------------------------------


def test_nvidia_smi_details_version_and_topology(sim_fleet: FleetHandle) -> None:
    out, _, status = run(sim_fleet, commands.gpu_details_query())
    rows = [line.split(", ") for line in out.splitlines()]
    assert status == 0 and len(rows) == 8
    assert rows[0][:4] == ["0", "580.95.05", "P1", "Enabled"]  # memory held, idle
    assert rows[0][4:10] == ["0", "0", "1200 MHz", "14001 MHz", "3090 MHz", "0x0000000000000001"]
    assert rows[0][10:] == ["5", "5", "16", "16"]

    out, _, status = run(sim_fleet, commands.smi_version())
    assert status == 0 and out == (SAMPLES / "nvidia_smi_version_580.txt").read_text()

    out, _, status = run(sim_fleet, commands.gpu_topology())
    assert status == 0 and out == (SAMPLES / "nvidia_smi_topo_8x_rtxpro6000_pcie.txt").read_text()

    sim_fleet.set_fault("gpu-01", "gpu_driver_error")
    for argv in (commands.gpu_details_query(), commands.smi_version(), commands.gpu_topology()):
        out, _, status = run(sim_fleet, argv)
        assert status == 9 and out.startswith("NVIDIA-SMI has failed")


def test_an_idle_gpu_drops_its_clocks_and_link(sim_fleet: FleetHandle) -> None:
    root(sim_fleet, f"systemctl stop --no-block {UNIT}")

    out, _, _ = run(sim_fleet, commands.gpu_details_query())

    first = out.splitlines()[0].split(", ")
    assert first[2] == "P8" and first[6:8] == ["180 MHz", "405 MHz"] and first[10] == "1"


# --- the whole probe -----------------------------------------------------------------------


def test_the_probe_of_an_envfile_host_matches_the_simulators_truth(
    make_fleet: Callable[..., FleetHandle],
) -> None:
    fleet = make_fleet(1, unit_styles={"gpu-01": "envfile"})
    spec = ProbeSpec(
        servers=(ServerSpec(UNIT, 8000, environment_files=(catalog.ENV_FILE,), journal_lines=5),)
    )
    out, _, _ = fleet.run("gpu-01", probe_sections.probe_script(spec))

    parse = parse_probe(
        out,
        [UNIT],
        integrity=False,
        environment_files={UNIT: (catalog.ENV_FILE,)},
        journal_lines={UNIT: 5},
    )

    truth = fleet.state("gpu-01")
    unit = truth["units"][UNIT]
    state = parse.state
    dep = state.deployments[UNIT]
    assert state.problems == []
    assert dep.unit.exec_main_pid == unit["exec_main_pid"] == unit["main_pid"]
    assert dep.unit.tasks_current == unit["tasks_current"]
    assert dep.unit.environment_files == [catalog.ENV_FILE]
    assert [f.path for f in dep.unit_files] == [FRAGMENT]
    assert dep.unit_files[0].sha256 == truth["unit_files"][FRAGMENT]["sha256"]
    (env,) = dep.environment_files
    assert env.sha256 == truth["unit_files"][catalog.ENV_FILE]["sha256"]
    assert env.variables == {
        "MODEL": "nvidia/Kimi-K2.5-NVFP4",
        "SERVED_MODEL_NAME": "kimi-k2.5",
        "HF_TOKEN": "<redacted>",
    }
    assert dep.journal is not None and len(dep.journal) == 5
    assert dep.server.model_roots == ["nvidia/Kimi-K2.5-NVFP4"]
    assert state.topology is not None and not state.topology.nvlink
    assert (state.driver_version, state.cuda_version) == ("580.95.05", "13.0")
    assert len(state.gpu_details) == 8
    kept = repr(state.to_json()) + repr([s.output for s in parse.sections.values()])
    assert catalog.FAKE_HF_TOKEN in out and catalog.FAKE_HF_TOKEN not in kept
