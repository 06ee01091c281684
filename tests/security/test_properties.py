"""Properties of everything a person's input can become on a host (hypothesis).

1. Every validator is total: for any value it returns or raises Django's ValidationError. Any
   other exception is a 500 in a form, the admin or the API.
2. A model field's validators and the command builder agree: a value the field accepts, the
   builder accepts too. Otherwise the row saves and every later command built from it is
   refused (or, where the builder does not check, carries what the field let through).
3. What a builder accepts reaches the host as one inert argument: `shlex.split` of the line the
   host is sent gives back the builder's argv exactly, the value is one token, and outside
   quotes the line holds only characters no shell interprets.
4. A rendered (or rewritten) unit file keeps its shape: one line per directive, the ExecStart=
   words are the engine's argv, and nothing systemd would expand ($, %) is in ExecStart=.
5. End to end: a hostile value a builder accepts, sent over the real SSH path to a simulated
   host, arrives as one argument of the one program that ran; nothing else ran, no file or
   unit changed.

The strategies mix shell metacharacters ($, `, ;, |, &, newline, quotes, spaces, globs), whole
payloads and unicode into valid examples, and draw values the validators' own patterns match.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from controlplane.audit.reasons import validate_reason
from controlplane.notifications.models import validate_event_types, validate_http_url
from deployments.evaluation.models import validate_levels, validate_messages, validate_prompts
from deployments.models import BenchmarkProfile, CoherenceCheck, Deployment, ModelArtifact
from deployments.unit_files import units
from deployments.unit_files.engine_flags import validate_extra_args
from hosts import commands, engine_commands, probe_sections, validators
from hosts.models import Host
from hosts.services import command_line_for, host_run
from hosts.services.remote import needs_root
from simulator.shell import runner
from tests.fleet import RegisteredFleet

PYTHON = "/opt/vllm/.venv/bin/python3"
# Examples per property: the whole file stays under a minute on two cores. The end-to-end
# property makes about fifty (each an SSH round trip); unit files, whose fields are drawn
# through the model's own validation, fewer.
FAST = settings(
    max_examples=80,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
UNIT_FILES = settings(FAST, max_examples=40)

# --- strategies ---------------------------------------------------------------------------------

METACHARACTERS = [
    "$",
    "`",
    ";",
    "|",
    "&",
    "\n",
    "\r",
    "\t",
    " ",
    "'",
    '"',
    "\\",
    "*",
    "?",
    "[",
    "]",
    "{",
    "}",
    "(",
    ")",
    "<",
    ">",
    "!",
    "#",
    "~",
    "%",
    "=",
    "^",
    "\x00",
    "\x1b",
    "\x7f",
    "\u00a0",
    "\u2028",
    "\u202e",
    "\u200b",
    "\ufeff",
    "é",
    "ß",
    "Ω",
    "中",
    "😀",
]
PAYLOADS = [
    "$(touch /tmp/pwned)",
    "`touch /tmp/pwned`",
    "; touch /tmp/pwned",
    "&& touch /tmp/pwned",
    "| touch /tmp/pwned",
    "\ntouch /tmp/pwned",
    "'; touch /tmp/pwned #",
    '"; touch /tmp/pwned #',
    "${IFS}",
    "$HOME",
    "$$",
    "/etc/*",
    "-rf",
    "--help",
    "%h",
    "%%",
    "\\\n",
    "'\"'\"'",
]
piece = st.one_of(st.sampled_from(METACHARACTERS), st.sampled_from(PAYLOADS), st.text(max_size=3))
hostile_text = st.lists(piece, max_size=6).map("".join)


@st.composite
def near(draw: st.DrawFn, examples: tuple[str, ...], pattern: str | None = None) -> str:
    """A valid value with something hostile put in, at its start, middle or end."""
    bases = st.sampled_from(examples)
    if pattern is not None:
        bases = bases | st.from_regex(pattern, fullmatch=True)
    base = draw(bases)
    at = draw(st.sampled_from([0, len(base)]) | st.integers(0, len(base)))
    return base[:at] + draw(piece) + base[at:]


def text_values(examples: tuple[str, ...], pattern: str | None = None) -> st.SearchStrategy[str]:
    """Strings around what a field accepts: hostile text, valid values with something put in,
    and (without `fullmatch`) whatever a search for the pattern matches, e.g. a trailing newline
    that `$` lets through."""
    options = [hostile_text, near(examples, pattern), st.sampled_from(examples)]
    if pattern is not None:
        options += [st.from_regex(pattern), st.from_regex(pattern, fullmatch=True)]
    return st.one_of(options)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | hostile_text,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(hostile_text | st.sampled_from(["role", "content"]), inner, max_size=3)
    ),
    max_leaves=8,
)
other_types = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.binary(max_size=8), json_values
)


def values(examples: tuple[str, ...], pattern: str | None = None) -> st.SearchStrategy[Any]:
    return text_values(examples, pattern) | other_types


# --- 1 and 2: validators are total, and agree with the builders ---------------------------------


@dataclass(frozen=True)
class Field:
    """A model field as the model validates it, what it is built into, and values to try."""

    model: type
    name: str
    values: st.SearchStrategy[Any]
    builder: Callable[[Any], object] | None = None  # raises UnsafeCommand when it refuses

    def clean(self, value: Any) -> Any:
        return self.model._meta.get_field(self.name).clean(value, None)  # type: ignore[attr-defined]


def _bench(**kwargs: Any) -> list[str]:
    base: dict[str, Any] = {
        "port": 8000,
        "model": "kimi-k2.5",
        "concurrency": 1,
        "input_tokens": 8,
        "output_tokens": 8,
        "timeout": 10,
        "num_requests": 1,
    }
    return engine_commands.bench_client(PYTHON, **{**base, **kwargs})


def _environment(value: Any) -> None:
    units.check_environment(value)


# What forms and serializers hand an integer field: integers, or text to parse.
port_values = st.integers() | st.sampled_from([1024, 8000, 65535]) | text_values(("8000",))
UNITS = ("vllm-kimi-k25.service", "sglang@1.service", "a.service")
PATHS = ("/opt/vllm/.venv/bin/vllm", "/models/moonshotai/Kimi-K2.5-INT4", "/x")
MODEL_IDS = ("moonshotai/Kimi-K2.5", "nvidia/Kimi-K2.5-NVFP4", "gpt2")
SERVED = ("kimi-k2.5", "Qwen3:235b", "a")
ENV = {"NCCL_DEBUG": "WARN", "VLLM_USE_V1": "1"}
LOCATION_RE = rf"(?:{validators.ABS_PATH_RE})|(?:{validators.MODEL_ID_RE})"
PROMPTS = ["The capital of France is", "Write a haiku\nabout GPUs"]

FIELDS = {
    "deployment unit": Field(
        Deployment, "unit", values(UNITS, validators.UNIT_RE), commands.check_unit
    ),
    "deployment engine_binary": Field(
        Deployment, "engine_binary", values(PATHS, validators.ABS_PATH_RE), commands.check_path
    ),
    "deployment engine_python": Field(
        Deployment,
        "engine_python",
        values(PATHS, validators.ABS_PATH_RE),
        lambda v: commands.integrity_check(v, "vllm"),
    ),
    "deployment engine_package_source": Field(
        Deployment,
        "engine_package_source",
        values(PATHS, validators.ABS_PATH_RE),
        lambda v: engine_commands.pip_reinstall(PYTHON, "vllm", "0.11.2", find_links=v),
    ),
    "deployment engine_dist": Field(
        Deployment,
        "engine_dist",
        values(("vllm", "sglang"), validators.DIST_NAME_RE),
        lambda v: commands.integrity_check(PYTHON, v),
    ),
    "deployment port": Field(Deployment, "port", port_values, commands.check_port),
    "deployment bind_address": Field(
        Deployment,
        "bind_address",
        st.ip_addresses().map(str) | values(("127.0.0.1", "0.0.0.0", "::1")),
        commands.check_address,
    ),
    "deployment extra_args": Field(
        Deployment,
        "extra_args",
        st.lists(
            values(("--enforce-eager", "--max-num-seqs=64"), validators.ENGINE_ARG_RE), max_size=4
        )
        | other_types,
    ),
    "deployment environment": Field(
        Deployment,
        "environment",
        st.dictionaries(text_values(tuple(ENV)), values(tuple(ENV.values())), max_size=3)
        | st.just(ENV)
        | other_types,
        _environment,
    ),
    "model path": Field(
        ModelArtifact,
        "path",
        values(PATHS + MODEL_IDS, LOCATION_RE),
        units.check_model_location,
    ),
    "model name": Field(ModelArtifact, "name", values(MODEL_IDS, validators.MODEL_ID_RE)),
    "model served_name": Field(
        ModelArtifact,
        "served_name",
        values(SERVED, validators.SERVED_NAME_RE),
        lambda v: _bench(model=v),
    ),
    "host name": Field(Host, "name", values(("gpu-01", "h100.lab"), validators.HOST_NAME_RE)),
    "host address": Field(
        Host, "address", values(("10.0.0.7", "gpu-01.lab", "[fe80::1]"), validators.ADDRESS_RE)
    ),
    "host username": Field(Host, "username", values(("root", "deploy"), validators.SSH_USER_RE)),
    "host port": Field(Host, "port", port_values),
    "host labels": Field(
        Host,
        "labels",
        st.dictionaries(text_values(("rack",)), values(("a1",)), max_size=3) | other_types,
    ),
    "benchmark prompts": Field(
        BenchmarkProfile,
        "prompts",
        st.lists(values(tuple(PROMPTS)), max_size=3) | other_types,
        lambda v: _bench(prompts=tuple(v)),
    ),
    "benchmark concurrency_levels": Field(
        BenchmarkProfile,
        "concurrency_levels",
        st.lists(st.integers(-2, 600) | other_types, max_size=9) | other_types,
    ),
    "coherence messages": Field(
        CoherenceCheck,
        "messages",
        st.lists(
            st.fixed_dictionaries(
                {
                    "role": st.sampled_from(["user", "system"]) | json_values,
                    "content": values(tuple(PROMPTS)) | json_values,
                }
            )
            | json_values,
            max_size=3,
        )
        | other_types,
    ),
}

# Validators that are called as functions (by services, forms and serializers), not only by
# model fields, with the values to try.
FUNCTIONS: dict[str, tuple[Callable[[Any], object], st.SearchStrategy[Any]]] = {
    "engine args syntax": (
        validators.validate_engine_args,
        st.lists(values(("--enforce-eager",), validators.ENGINE_ARG_RE), max_size=4) | other_types,
    ),
    "extra args": (
        validate_extra_args,
        st.lists(
            values(("--enforce-eager", "--max-num-seqs", "64", "--tp=2"), validators.ENGINE_ARG_RE),
            max_size=4,
        )
        | other_types,
    ),
    "environment": (
        units.validate_environment,
        st.dictionaries(text_values(tuple(ENV)), values(tuple(ENV.values())), max_size=3)
        | other_types,
    ),
    "model location": (validators.validate_model_location, values(PATHS, LOCATION_RE)),
    # Text only: the bind_address field hands it a string.
    "bind address": (
        validators.validate_bind_address,
        text_values(("127.0.0.1", "::1", "fe80::1%eth0")),
    ),
    "levels": (validate_levels, st.lists(st.integers(-2, 600) | other_types, max_size=9)),
    "prompts": (validate_prompts, st.lists(values(tuple(PROMPTS)), max_size=3) | other_types),
    "messages": (validate_messages, FIELDS["coherence messages"].values),
    "reason": (validate_reason, values(("INT4 serves more tokens", "ok"))),
    "webhook url": (validate_http_url, values(("https://hooks.example.test/x",))),
    "webhook event types": (
        validate_event_types,
        st.lists(values(("change.approval_needed",)), max_size=3) | other_types,
    ),
}


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_a_model_field_accepts_or_raises_validation_error(name: str) -> None:
    field = FIELDS[name]

    @FAST
    @given(value=field.values)
    def check(value: Any) -> None:
        with contextlib.suppress(ValidationError):
            field.clean(value)

    check()


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_a_validator_accepts_or_raises_validation_error(name: str) -> None:
    validate, strategy = FUNCTIONS[name]

    @FAST
    @given(value=strategy)
    def check(value: Any) -> None:
        with contextlib.suppress(ValidationError):
            validate(value)

    check()


@pytest.mark.parametrize("name", sorted(n for n, f in FIELDS.items() if f.builder is not None))
def test_what_a_field_accepts_its_command_builder_accepts(name: str) -> None:
    field = FIELDS[name]
    assert field.builder is not None

    @FAST
    @given(value=field.values)
    def check(value: Any) -> None:
        try:
            cleaned = field.clean(value)
        except ValidationError:
            return
        if cleaned in ("", None) or cleaned == {}:
            return  # blank: the builder is not called (no package source, no environment)
        try:
            field.builder(cleaned)  # type: ignore[misc]
        except commands.UnsafeCommand as exc:
            raise AssertionError(f"{name} accepts {cleaned!r}, its builder refuses: {exc}") from exc

    check()


# Found by the properties above: Django's RegexValidator searches, and `$` matches before a
# trailing newline, so "x.service\n" passed the model validators that the builders refuse.
@pytest.mark.parametrize(
    ("model", "field", "value"),
    [
        (Deployment, "unit", "vllm-kimi-k25.service\n"),
        (Deployment, "engine_binary", "/opt/vllm/.venv/bin/vllm\n"),
        (Deployment, "engine_dist", "vllm\n"),
        (ModelArtifact, "served_name", "kimi-k2.5\n"),
        (ModelArtifact, "name", "moonshotai/Kimi-K2.5\n"),
        (Host, "name", "gpu-01\n"),
        (Host, "username", "root\n"),
        (Host, "address", "10.0.0.7\n"),
    ],
)
def test_a_trailing_newline_is_refused_by_the_model(model: type, field: str, value: str) -> None:
    model_field = model._meta.get_field(field)  # type: ignore[attr-defined]
    model_field.clean(value.rstrip("\n"), None)
    with pytest.raises(ValidationError):
        model_field.clean(value, None)


# Found by the properties above: a message whose role was a list or an object raised TypeError
# (unhashable) inside the validator, a 500 in the admin instead of a field error.
@pytest.mark.parametrize("role", [[], {}, ["user"], {"user": 1}])
def test_a_message_role_of_the_wrong_type_is_a_validation_error(role: object) -> None:
    with pytest.raises(ValidationError, match="role"):
        validate_messages([{"role": role, "content": "Hello"}])


# --- 3: what a builder accepts is one inert argument --------------------------------------------

# Characters a POSIX shell gives no meaning outside quotes (shlex.quote leaves them bare).
SAFE_BARE = set(string.ascii_letters + string.digits + "@%+=:,./_-")


def shell_effective(line: str) -> str:
    """The characters of `line` a shell would interpret: outside single quotes everything not
    in SAFE_BARE (spaces separate words), inside double quotes $ ` and \\. Fails on an
    unterminated quote."""
    found = []
    state = ""
    for ch in line:
        if state == "'":
            state = "" if ch == "'" else state
        elif state == '"':
            if ch == '"':
                state = ""
            elif ch in "$`\\":
                found.append(ch)
        elif ch in "'\"":
            state = ch
        elif ch != " " and ch not in SAFE_BARE:
            found.append(ch)
    assert state == "", f"unterminated quote in {line!r}"
    return "".join(found)


def assert_inert(argv: list[str], line: str, tokens: list[str]) -> None:
    """`line` is `argv` as one command: each value one word, nothing a shell would act on."""
    assert "\x00" not in line  # a real shell's argv ends at a NUL
    assert shlex.split(line) == [*argv, "2>&1"]
    assert shell_effective(line.removesuffix(" 2>&1")) == "", line
    for token in tokens:
        assert token in argv, (token, argv)


UNIT_DIR = commands.UNIT_DIR


@dataclass(frozen=True)
class Builder:
    """A builder with one free part: how to build, what to draw, which tokens must appear."""

    build: Callable[[Any], list[str]]
    values: st.SearchStrategy[Any]
    tokens: Callable[[Any], list[str]]
    # The model-level check of the same value, when one exists: it must agree with the builder.
    validate: Callable[[Any], object] | None = None


def _field_clean(model: type, name: str) -> Callable[[Any], object]:
    return lambda value: model._meta.get_field(name).clean(value, None)  # type: ignore[attr-defined]


unit_values = values(UNITS, validators.UNIT_RE)
path_values = values(PATHS, validators.ABS_PATH_RE)
ports = st.integers(-1, 70000) | st.sampled_from([1, 8000, 65535]) | other_types
CHECK_UNIT = _field_clean(Deployment, "unit")
CHECK_PATH = _field_clean(Deployment, "engine_binary")

BUILDERS: dict[str, Builder] = {
    "systemctl show": Builder(commands.unit_show, unit_values, lambda v: [v], CHECK_UNIT),
    "systemctl cat": Builder(commands.unit_cat, unit_values, lambda v: [v], CHECK_UNIT),
    "unit file hash": Builder(
        commands.unit_file_hash, unit_values, lambda v: [f"{UNIT_DIR}/{v}"], CHECK_UNIT
    ),
    "unit action": Builder(
        lambda v: commands.unit_action("restart", v), unit_values, lambda v: [v], CHECK_UNIT
    ),
    "write unit file": Builder(
        commands.write_unit_file, unit_values, lambda v: [f"{UNIT_DIR}/{v}"], CHECK_UNIT
    ),
    "journal": Builder(lambda v: commands.unit_journal(v, 40), unit_values, lambda v: [v]),
    "journal tail": Builder(
        lambda v: commands.unit_journal_tail(v, 200), unit_values, lambda v: [v], CHECK_UNIT
    ),
    "journal tail lines": Builder(
        lambda v: commands.unit_journal_tail(UNITS[0], v),
        st.integers(-5, 2000) | other_types,
        lambda v: [str(v)],
    ),
    "file hash": Builder(commands.file_hash, path_values, lambda v: [v], CHECK_PATH),
    "file read": Builder(commands.file_read, path_values, lambda v: [v], CHECK_PATH),
    "integrity check python": Builder(
        lambda v: commands.integrity_check(v, "vllm"), path_values, lambda v: [v], CHECK_PATH
    ),
    "integrity check dist": Builder(
        lambda v: commands.integrity_check(PYTHON, v),
        values(("vllm",), validators.DIST_NAME_RE),
        lambda v: [v],
        _field_clean(Deployment, "engine_dist"),
    ),
    "http get": Builder(
        lambda v: commands.http_get(v, "/metrics"),
        ports,
        lambda v: [f"http://127.0.0.1:{v}/metrics"],
    ),
    "completion body": Builder(
        lambda v: commands.completion_request(8000, json.dumps({"prompt": v})),
        hostile_text,
        lambda v: [json.dumps({"prompt": v})],
    ),
    "chat request port": Builder(
        lambda v: engine_commands.chat_completion_request(v),
        ports,
        lambda v: [f"http://127.0.0.1:{v}/v1/chat/completions"],
    ),
    "bench served name": Builder(
        lambda v: _bench(model=v),
        values(SERVED, validators.SERVED_NAME_RE),
        lambda v: [v],
        _field_clean(ModelArtifact, "served_name"),
    ),
    "bench prompt": Builder(
        lambda v: _bench(prompts=(v,)),
        values(tuple(PROMPTS)),
        lambda v: [v],
        lambda v: validate_prompts([v]),
    ),
    "bench engine python": Builder(
        lambda v: engine_commands.bench_client(
            v,
            port=8000,
            model="kimi-k2.5",
            concurrency=1,
            input_tokens=8,
            output_tokens=8,
            timeout=10,
            duration=5,
        ),
        path_values,
        lambda v: [v],
        CHECK_PATH,
    ),
    "bench api key variable": Builder(
        lambda v: _bench(api_key_env=v),
        values(("VLLM_API_KEY",), r"^[A-Za-z_][A-Za-z0-9_]*$"),
        lambda v: [v] if v else [],
    ),
    "pip version": Builder(
        lambda v: engine_commands.pip_reinstall(PYTHON, "vllm", v),
        values(("0.11.2", "0.11.2+cu128", "1.0rc1"), engine_commands.VERSION_RE),
        lambda v: [f"vllm=={v}"],
    ),
    "pip wheel directory": Builder(
        lambda v: engine_commands.pip_reinstall(PYTHON, "vllm", "0.11.2", find_links=v),
        path_values,
        lambda v: [v] if v else [],
        _field_clean(Deployment, "engine_package_source"),
    ),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_what_a_builder_accepts_reaches_the_host_as_one_inert_argument(name: str) -> None:
    builder = BUILDERS[name]
    sudo_host = Host(name="gpu-01", address="127.0.0.1", use_sudo=True)
    plain_host = Host(name="gpu-01", address="127.0.0.1", use_sudo=False)

    @FAST
    @given(value=builder.values)
    def check(value: Any) -> None:
        try:
            argv = builder.build(value)
        except commands.UnsafeCommand as exc:
            # Refusing is always safe; refusing what the model accepted is a validator bug.
            if builder.validate is not None and isinstance(value, str) and value:
                with pytest.raises(ValidationError):
                    builder.validate(value)
                    raise AssertionError(f"the model accepts {value!r}, the builder: {exc}")
            return
        tokens = builder.tokens(value)
        assert_inert(argv, commands.render(argv), tokens)
        for host in (sudo_host, plain_host):
            line = command_line_for(host, argv)
            full = ["sudo", "-n", *argv] if host.use_sudo and needs_root(argv) else argv
            assert_inert(full, line, tokens)

    check()


def test_the_inert_check_sees_an_unquoted_value() -> None:
    """The property's own check catches a builder that forgets to quote (its test of itself)."""
    argv = commands.unit_show(UNITS[0])
    line = " ".join([*argv[:2], "x;touch /tmp/pwned", *argv[3:]])
    with pytest.raises(AssertionError):
        assert_inert([*argv[:2], "x;touch /tmp/pwned", *argv[3:]], line + " 2>&1", [])


# The probe script: every section one line, each line exactly its marker, command and status.


def mostly(valid: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`valid` three times in four: a spec is refused as a whole if one part is."""
    return st.one_of(valid, valid, valid, other)


@st.composite
def probe_specs(draw: st.DrawFn) -> commands.ProbeSpec:
    servers = draw(
        st.lists(
            st.builds(
                commands.ServerSpec,
                unit=mostly(st.from_regex(validators.UNIT_RE, fullmatch=True), unit_values),
                port=mostly(st.integers(1, 65535), st.integers(-5, 70000)),
                engine_python=st.sampled_from(["", PYTHON]) | path_values,
                engine_dist=mostly(st.just("vllm"), values(("vllm",), validators.DIST_NAME_RE)),
                # Paths a unit named on the host last time: the host's word, any text.
                environment_files=st.lists(
                    mostly(
                        st.from_regex(validators.ABS_PATH_RE, fullmatch=True),
                        text_values(PATHS, validators.ABS_PATH_RE),
                    ),
                    max_size=3,
                ).map(tuple),
                journal_lines=st.integers(0, 1200),
            ),
            max_size=3,
        )
    )
    return commands.ProbeSpec(
        servers=tuple(servers), integrity=draw(st.booleans()), sudo=draw(st.booleans())
    )


@FAST
@given(spec=probe_specs())
def test_the_probe_script_is_one_inert_command_per_section(spec: commands.ProbeSpec) -> None:
    try:
        sections = probe_sections.probe_sections(spec)
    except commands.UnsafeCommand:
        with pytest.raises(commands.UnsafeCommand):
            probe_sections.probe_script(spec)
        return
    script = probe_sections.probe_script(spec)
    # Words as a shell reads them (a newline inside quotes, e.g. in the integrity check's
    # Python, stays in its word; one outside would split it).
    expected: list[str] = []
    for name, argv in sections:
        expected += ["echo", f"{commands.MARK_BEGIN}{name};", *argv, "2>&1;"]
        expected += ["echo", f"{commands.MARK_END}{name}:$?"]
    assert shlex.split(script) == expected
    # All the shell acts on, per section: `;`, `2>&1`, `;`, the status ("$?") and the newline.
    assert shell_effective(script) == ";>&;$\n" * len(sections)


# --- 4: a unit file keeps its shape -------------------------------------------------------------


def accepted(model: type, name: str, strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Values of `strategy` the model field accepts, as it cleans them."""
    clean = _field_clean(model, name)

    def ok(value: Any) -> bool:
        try:
            clean(value)
        except ValidationError:
            return False
        return True

    return strategy.filter(ok)


def engine_args() -> st.SearchStrategy[tuple[str, ...]]:
    arg = st.from_regex(validators.ENGINE_ARG_RE) | st.sampled_from(
        ["--enforce-eager", "--max-num-seqs=64", "--gpu-memory-utilization=0.95"]
    )
    return accepted(Deployment, "extra_args", st.lists(arg, max_size=4)).map(tuple)


unit_specs = st.builds(
    units.UnitSpec,
    unit=accepted(Deployment, "unit", st.from_regex(validators.UNIT_RE)),
    engine=st.sampled_from(["vllm", "sglang"]),
    engine_binary=accepted(Deployment, "engine_binary", st.from_regex(validators.ABS_PATH_RE)),
    model_path=accepted(ModelArtifact, "path", st.from_regex(LOCATION_RE)),
    served_name=accepted(ModelArtifact, "served_name", st.from_regex(validators.SERVED_NAME_RE)),
    tensor_parallel_size=st.integers(1, 64),
    max_model_len=st.integers(256, 10_000_000),
    port=st.integers(1024, 65535),
    bind_address=st.ip_addresses().map(str),
    extra_args=engine_args(),
    environment=accepted(
        Deployment,
        "environment",
        st.dictionaries(
            st.from_regex(units.ENV_NAME_RE, fullmatch=True),
            st.from_regex(units.ENV_VALUE_RE, fullmatch=True),
            max_size=3,
        ),
    ).map(lambda env: tuple(sorted(env.items()))),
)


def engine_argv(spec: units.UnitSpec) -> list[str]:
    if spec.engine == "sglang":
        head = [
            spec.engine_binary,
            "-m",
            "sglang.launch_server",
            "--model-path",
            spec.model_path,
            "--served-model-name",
            spec.served_name,
            "--tp-size",
            str(spec.tensor_parallel_size),
            "--context-length",
            str(spec.max_model_len),
        ]
    else:
        head = [
            spec.engine_binary,
            "serve",
            spec.model_path,
            "--served-model-name",
            spec.served_name,
            "--tensor-parallel-size",
            str(spec.tensor_parallel_size),
            "--max-model-len",
            str(spec.max_model_len),
        ]
    return [*head, "--port", str(spec.port), "--host", spec.bind_address, *spec.extra_args]


def assert_unit_shape(text: str, spec: units.UnitSpec, environment: dict[str, str]) -> None:
    lines = text.split("\n")
    assert lines[-1] == "" and "\r" not in text
    directives = [line for line in lines if line and not line.startswith("[")]
    assert all("=" in line and line[0].isupper() for line in directives), text
    starts = [line for line in lines if line.startswith("ExecStart=")]
    assert len(starts) == 1
    exec_line = starts[0].removeprefix("ExecStart=")
    assert shlex.split(exec_line) == engine_argv(spec)
    # systemd expands $NAME, ${NAME} and %-specifiers in ExecStart=, even inside quotes.
    assert "$" not in exec_line and "%" not in exec_line
    assert units.exec_start_of(text) == exec_line == units.exec_start(spec)
    assert units.environment_of(text) == environment


@UNIT_FILES
@given(spec=unit_specs)
def test_a_rendered_unit_keeps_its_shape(spec: units.UnitSpec) -> None:
    text = units.render_unit(spec)
    assert_unit_shape(text, spec, dict(spec.environment))
    assert len(text.split("\n")) == 12 + len(spec.environment)
    description = next(line for line in text.split("\n") if line.startswith("Description="))
    assert description == f"Description={units.description(spec.unit)}"  # names no revision


@UNIT_FILES
@given(old=unit_specs, new=unit_specs)
def test_a_rewritten_unit_moves_only_the_command_line_and_the_environment(
    old: units.UnitSpec, new: units.UnitSpec
) -> None:
    base = units.render_unit(old)
    new_env = dict(new.environment)
    text = units.rewrite_unit(
        base, exec_start_line=units.exec_start(new), old_env=dict(old.environment), new_env=new_env
    )
    assert_unit_shape(text, new, new_env)
    untouched = [
        line for line in base.split("\n") if not line.startswith(("ExecStart=", "Environment="))
    ]
    kept = [
        line for line in text.split("\n") if not line.startswith(("ExecStart=", "Environment="))
    ]
    assert kept == untouched


@pytest.mark.parametrize("address", ["fe80::1%eth0", "::1%h", "::1%${HF_TOKEN}", "::1%a b"])
def test_a_bind_address_with_a_scope_id_stays_out_of_the_unit(address: str) -> None:
    with pytest.raises(ValidationError):
        Deployment._meta.get_field("bind_address").run_validators(address)
    spec = units.UnitSpec(
        unit=UNITS[0],
        engine="vllm",
        engine_binary=PATHS[0],
        model_path=PATHS[1],
        served_name=SERVED[0],
        tensor_parallel_size=8,
        max_model_len=262144,
        port=8000,
        bind_address=address,
        extra_args=(),
    )
    with pytest.raises(commands.UnsafeCommand):  # a row written by hand reaches no unit
        units.exec_start(spec)


# --- 5: end to end, over SSH to a simulated host ------------------------------------------------


@pytest.fixture
def received(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """The argv of every program the simulated hosts' shell runs, as it runs it: after the
    shell has split, unquoted and expanded the line (and before sudo is stripped)."""
    seen: list[list[str]] = []
    original = runner._run_program

    async def recording(session: Any, argv: list[str], *args: Any, **kwargs: Any) -> Any:
        seen.append(list(argv))
        return await original(session, argv, *args, **kwargs)

    monkeypatch.setattr(runner, "_run_program", recording)
    yield seen


# A script for the engine's Python on stdin: prints the arguments its process was given.
ARGV_ECHO = "import json, sys\nprint(json.dumps(sys.argv[1:]))\n"
# Text a database can hold and SSH can carry (no surrogates, no NUL), hostile otherwise.
wire_text = hostile_text.filter(
    lambda s: "\x00" not in s and not any(0xD800 <= ord(c) <= 0xDFFF for c in s)
)
DEAD_PORT = 1  # nothing listens there on the simulated host: curl fails at once


def _prompt(value: str) -> list[str]:
    return _bench(port=DEAD_PORT, prompts=(value,))


# name -> (builder, values, examples): about fifty SSH round trips in all.
E2E: dict[str, tuple[Callable[[str], list[str]], st.SearchStrategy[str], int]] = {
    # the benchmark client's prompt: free text, run by a real Python on the simulated host
    "bench prompt": (_prompt, wire_text.filter(lambda s: bool(s.strip())), 20),
    # a completion's JSON body, to a port where nothing listens
    "completion body": (
        lambda v: commands.completion_request(DEAD_PORT, json.dumps({"prompt": v})),
        wire_text,
        15,
    ),
    "journal tail": (
        lambda v: commands.unit_journal_tail(v, 5),
        accepted(Deployment, "unit", unit_values),
        8,
    ),
    "file read": (commands.file_read, accepted(Deployment, "engine_binary", path_values), 8),
}
HOSTILE = "$(touch /tmp/pwned); `reboot` | x && y\n'\"*"


def _host_facts(fleet: RegisteredFleet, name: str) -> dict[str, Any]:
    state = fleet.state(name)
    return {
        "unit_files": state["unit_files"],
        "disk": state["disk"],
        "faults": state["faults"],
        "units": {
            u: (s["active_state"], s["main_pid"], s.get("n_restarts"))
            for u, s in state["units"].items()
        },
    }


def test_a_hostile_value_reaches_the_simulated_host_as_one_argument(
    registered_fleet: RegisteredFleet, received: list[list[str]]
) -> None:
    host = registered_fleet.host("gpu-01")
    registered_fleet.wait_for_unit("gpu-01")  # settled: nothing moves on its own from here
    before = _host_facts(registered_fleet, "gpu-01")

    def send(build: Callable[[str], list[str]], value: str) -> None:
        try:
            argv = build(value)
        except commands.UnsafeCommand:
            assume(False)
            return
        registered_fleet.clear_command_log("gpu-01")
        received.clear()
        result = host_run(
            host=host, argv=argv, stdin=ARGV_ECHO if argv[0] == PYTHON else None, timeout=20
        )
        # What the host was sent, and the one program it ran, with the value as one argument.
        assert registered_fleet.command_log("gpu-01") == [command_line_for(host, argv)]
        expected = ["sudo", "-n", *argv] if host.use_sudo and needs_root(argv) else argv
        assert received == [expected], received
        if argv[0] == PYTHON:  # and what the program's own process was given
            assert result.exit_status == 0, result.stderr
            args = json.loads(result.stdout)
            assert args[args.index("--prompt") + 1] == value
        # Nothing else happened on the host.
        assert _host_facts(registered_fleet, "gpu-01") == before

    sent = 0

    def fuzz(build: Callable[[str], list[str]], strategy: st.SearchStrategy[str], n: int) -> None:
        @settings(
            max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        @given(value=strategy)
        def check(value: str) -> None:
            nonlocal sent
            send(build, value)
            sent += 1

        check()

    for build, strategy, examples in E2E.values():
        fuzz(build, strategy, examples)
    send(_prompt, HOSTILE)
    send(lambda v: commands.completion_request(DEAD_PORT, json.dumps({"prompt": v})), HOSTILE)
    assert sent >= 40
