"""Remote command lines are built only from validated parts, each shell-quoted."""

from __future__ import annotations

import shlex

import pytest
from django.core.exceptions import ValidationError

from deployments.models import Deployment, ModelArtifact
from deployments.unit_files import units
from hosts import commands, probe_sections, validators

HOSTILE = [
    "x;reboot.service",
    "$(reboot).service",
    "`reboot`.service",
    "a\nreboot.service",
    "a'b.service",
    'a"b.service',
    "a b.service",
    "../../etc/passwd.service",
    "-rf.service",
]


@pytest.mark.parametrize("unit", HOSTILE)
def test_builders_refuse_hostile_unit_names(unit):
    for build in (commands.unit_show, commands.unit_file_hash, commands.write_unit_file):
        with pytest.raises(commands.UnsafeCommand):
            build(unit)
    with pytest.raises(commands.UnsafeCommand):
        commands.unit_action("restart", unit)


@pytest.mark.parametrize("unit", HOSTILE)
def test_the_model_validator_refuses_hostile_unit_names(unit):
    with pytest.raises(ValidationError):
        validators.validate_unit_name(unit)


@pytest.mark.parametrize(
    "path",
    ["/models/x;rm -rf /", "/models/$(id)", "/models/`id`", "relative/path", "/a\n/b", "/a/../b b"],
)
def test_paths_are_refused(path):
    with pytest.raises(ValidationError):
        validators.validate_abs_path(path)
    with pytest.raises(commands.UnsafeCommand):
        commands.check_path(path)


@pytest.mark.parametrize(
    "args",
    [["--x=$(reboot)"], ["--x;reboot"], ["--x=`id`"], ["--x=a b"], ["--x\n--y"], ["plain"], "--x"],
)
def test_engine_arguments_are_refused(args):
    with pytest.raises(ValidationError):
        validators.validate_engine_args(args)


def test_a_systemctl_action_must_be_one_of_the_three():
    with pytest.raises(commands.UnsafeCommand):
        commands.unit_action("kill", "vllm.service")


def test_the_probe_script_splits_back_into_the_intended_words():
    spec = commands.ProbeSpec(
        servers=(
            commands.ServerSpec("vllm-kimi-k25.service", 8000, "/opt/vllm/.venv/bin/python3"),
        ),
        integrity=True,
    )
    lexer = shlex.shlex(probe_sections.probe_script(spec), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    for name, argv in probe_sections.probe_sections(spec):
        start = words.index(f"@@cp:begin:{name}")
        # echo MARK ; <argv...> 2 >& 1 ; echo END$?
        assert words[start + 1] == ";"
        assert words[start + 2 : start + 2 + len(argv)] == argv
        assert words[start + 2 + len(argv) : start + 6 + len(argv)] == ["2", ">&", "1", ";"]


def test_model_level_validation_catches_what_the_admin_or_api_would_submit(db):
    from tests.factories import make_catalog, make_host

    host = make_host("gpu-09")
    model = make_catalog()["NVFP4"]
    bad = Deployment(host=host, unit="x;reboot.service", model=model, extra_args=["--a=$(id)"])
    with pytest.raises(ValidationError) as err:
        bad.full_clean()
    assert {"unit", "extra_args"} <= set(err.value.message_dict)
    artifact = ModelArtifact(
        name="evil/$(id)", variant="FP8", weights_gib=1, path="/m/`id`", served_name="a b"
    )
    with pytest.raises(ValidationError) as err:
        artifact.full_clean()
    assert {"name", "path", "served_name"} <= set(err.value.message_dict)


def test_the_unit_file_exec_start_parses_back_to_the_same_arguments():
    spec = units.UnitSpec(
        unit="vllm-kimi-k25.service", engine="vllm", engine_binary="/opt/vllm/.venv/bin/vllm",
        model_path="/models/moonshotai/Kimi-K2.5-INT4", served_name="kimi-k2.5",
        tensor_parallel_size=8, max_model_len=262144, port=8000, bind_address="127.0.0.1",
        extra_args=("--gpu-memory-utilization=0.95", "--enable-expert-parallel"),
    )  # fmt: skip
    text = units.render_unit(spec)
    exec_line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    argv = shlex.split(exec_line.removeprefix("ExecStart="))
    assert argv[:3] == ["/opt/vllm/.venv/bin/vllm", "serve", "/models/moonshotai/Kimi-K2.5-INT4"]
    assert argv[-2:] == ["--gpu-memory-utilization=0.95", "--enable-expert-parallel"]
    assert "revision" not in text  # Description= names no revision a later one would outdate
