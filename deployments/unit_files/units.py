"""A deployment's systemd unit: rendering a new one, and rewriting an existing one so that only
what a change is about moves. Pure: values in, text out.

A unit adopted from a host is kept byte for byte (LimitNOFILE=, Restart=, EnvironmentFile=,
comments, ordering). A change rewrites its ExecStart= line (the engine's command line) and the
Environment= assignments whose values it changes; every other line stays as the operator wrote
it, so a rollback can write the exact bytes of an earlier revision back.

Every value has passed the model validators already; the ExecStart line is still assembled with
shlex.join, and Environment= values come from a strict alphabet, so nothing can split into
extra words or lines.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass, field

from hosts import commands, validators

ENV_NAME_RE = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
ENV_VALUE_RE = re.compile(r"[A-Za-z0-9._:,/+=@%-]{0,500}")
# Environment variables whose values are secrets: they belong in an EnvironmentFile= on the
# host, never in a unit file the control plane stores, shows and audits.
SECRET_NAME_RE = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASS|CREDENTIAL|AUTH", re.IGNORECASE)

# A deployment's drain grace: how long a stopping server lets the requests in flight finish.
DRAIN_GRACE_MAX_SECONDS = 3600
# systemd's TimeoutStopSec= is the grace plus this: after the drain, vLLM still aborts what is
# left, stops its EngineCore and GPU workers and frees their memory (seconds to tens of seconds
# on 8 GPUs holding a 1T-parameter model), and SIGKILL in the middle of that can leave GPU
# memory held until the workers are reaped. SGLang, which drains on SIGTERM without a bound
# of its own, is stopped by this timeout.
STOP_MARGIN_SECONDS = 30


def timeout_stop_seconds(drain_grace: int) -> int:
    """TimeoutStopSec= for a unit whose engine drains for `drain_grace` seconds."""
    return drain_grace + STOP_MARGIN_SECONDS


@dataclass(frozen=True)
class UnitSpec:
    unit: str
    engine: str
    engine_binary: str
    model_path: str  # an absolute path, or a repository id the engine downloads or has cached
    served_name: str
    tensor_parallel_size: int
    max_model_len: int
    port: int
    bind_address: str
    extra_args: tuple[str, ...]
    environment: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    drain_grace: int = 0  # seconds; 0: the engine aborts what is in flight when stopped


def check_drain_grace(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise commands.UnsafeCommand(f"refusing a drain grace of {value!r}")
    if not 0 <= value <= DRAIN_GRACE_MAX_SECONDS:
        raise commands.UnsafeCommand(f"refusing a drain grace of {value!r} s")
    return value


def check_model_location(value: str) -> str:
    if not isinstance(value, str) or not (
        re.fullmatch(validators.ABS_PATH_RE, value) or re.fullmatch(validators.MODEL_ID_RE, value)
    ):
        raise commands.UnsafeCommand(f"refusing to send model {value!r}")
    return value


def check_environment(environment: dict[str, str] | tuple[tuple[str, str], ...]) -> None:
    pairs = environment.items() if isinstance(environment, dict) else environment
    for name, value in pairs:
        if not ENV_NAME_RE.fullmatch(str(name)) or not ENV_VALUE_RE.fullmatch(str(value)):
            raise commands.UnsafeCommand(f"refusing to write environment {name!r}={value!r}")


def validate_environment(value: object) -> None:
    """Model-level validator for a deployment's Environment= variables."""
    from django.core.exceptions import ValidationError

    if not isinstance(value, dict):
        raise ValidationError("The environment must be a mapping of NAME to value.")
    for name, val in value.items():
        if not ENV_NAME_RE.fullmatch(str(name)):
            raise ValidationError(f"{name!r} is not a variable name (A-Z, 0-9 and _).")
        if SECRET_NAME_RE.search(str(name)):
            raise ValidationError(
                f"{name} looks like a secret: put it in an EnvironmentFile= on the host, where "
                "the control plane never stores or shows it."
            )
        if not isinstance(val, str) or not ENV_VALUE_RE.fullmatch(val):
            raise ValidationError(
                f"The value of {name} may hold letters, digits and . _ : , / + = @ % - only."
            )


def exec_start(spec: UnitSpec) -> str:
    commands.check_path(spec.engine_binary)
    check_model_location(spec.model_path)
    commands.check_port(spec.port)
    # No bind address: the unit runs without --host, on the engine's own default (vLLM and
    # SGLang listen on every interface then), as an adopted unit that had none did.
    host = ["--host", commands.check_address(spec.bind_address)] if spec.bind_address else []
    grace = check_drain_grace(spec.drain_grace)
    # vLLM drains only when told to (--shutdown-timeout 0, its default, aborts); SGLang always
    # drains on SIGTERM and has no such flag: systemd's TimeoutStopSec= bounds it.
    shutdown = ["--shutdown-timeout", str(grace)] if grace else []
    if spec.engine == "sglang":
        argv = [
            spec.engine_binary, "-m", "sglang.launch_server",
            "--model-path", spec.model_path,
            "--served-model-name", spec.served_name,
            "--tp-size", str(spec.tensor_parallel_size),
            "--context-length", str(spec.max_model_len),
            "--port", str(spec.port),
            *host,
        ]  # fmt: skip
    else:
        argv = [
            spec.engine_binary, "serve", spec.model_path,
            "--served-model-name", spec.served_name,
            "--tensor-parallel-size", str(spec.tensor_parallel_size),
            "--max-model-len", str(spec.max_model_len),
            "--port", str(spec.port),
            *host,
            *shutdown,
        ]  # fmt: skip
    return shlex.join([*argv, *spec.extra_args])


def render_unit(spec: UnitSpec) -> str:
    """A new unit, for a deployment the host does not have yet."""
    commands.check_unit(spec.unit)
    check_environment(spec.environment)
    environment = "".join(_environment_line(k, v) for k, v in spec.environment)
    grace = check_drain_grace(spec.drain_grace)
    stop = f"TimeoutStopSec={timeout_stop_seconds(grace)}\n" if grace else ""
    return (
        "[Unit]\n"
        f"Description={description(spec.unit)}\n"
        "After=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"{environment}"
        f"ExecStart={exec_start(spec)}\n"
        "Restart=no\n"
        f"{stop}"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


@dataclass
class _Line:
    """One logical line of a unit file: its physical lines (continuations joined by the
    parser, kept apart here so untouched lines are written back exactly)."""

    raw: list[str]
    section: str

    @property
    def logical(self) -> str:
        text = ""
        for part in self.raw:
            stripped = part.rstrip("\n")
            text += stripped[:-1] + " " if stripped.endswith("\\") else stripped
        return text.strip()

    def key(self) -> str | None:
        logical = self.logical
        if not logical or logical[0] in "#;[" or "=" not in logical:
            return None
        return logical.split("=", 1)[0].strip()


def _lines(text: str) -> list[_Line]:
    lines: list[_Line] = []
    section = ""
    pending: list[str] = []
    for physical in text.splitlines(keepends=True):
        pending.append(physical)
        if physical.rstrip("\n").endswith("\\") and not physical.lstrip().startswith(("#", ";")):
            continue
        line = _Line(pending, section)
        stripped = line.logical
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            line.section = section
        lines.append(line)
        pending = []
    if pending:
        lines.append(_Line(pending, section))
    return lines


def environment_of(text: str) -> dict[str, str]:
    """The Environment= assignments of a unit's [Service] section (later ones win)."""
    env: dict[str, str] = {}
    for line in _lines(text):
        if line.section == "Service" and line.key() == "Environment":
            for word in _split(line.logical.split("=", 1)[1]):
                name, eq, value = word.partition("=")
                if eq:
                    env[name] = value.replace("%%", "%")
    return env


def _environment_line(name: str, value: str) -> str:
    """One Environment= assignment; systemd expands specifiers (%h, %i, ...) there, so a value's
    own % is written %% and stays the character the operator typed."""
    return f"Environment={name}={value.replace('%', '%%')}\n"


def _split(value: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


class UnitNotRewritable(ValueError):
    """The unit's command line cannot be rewritten in place (the message says why)."""


def description(unit: str) -> str:
    """The Description= of a unit the control plane renders: it names no model or revision,
    which a later revision would make untrue."""
    return f"Inference server {unit.removesuffix('.service')} (managed by the GPU control plane)"


# What earlier releases rendered; a rewrite replaces it, since it named revision 1 for ever.
_RENDERED_DESCRIPTION_RE = re.compile(r"Description=\S+ server \S+ \(controlplane revision \d+\)")
# systemd's prefixes before an ExecStart= program (ignore failure, argv[0], privileges...).
_EXEC_PREFIX_RE = re.compile(r"[-@:+!|]*")


def rewrite_unit(
    text: str,
    *,
    exec_start_line: str,
    old_env: dict[str, str],
    new_env: dict[str, str],
    unit: str = "",
    drain_grace: int = 0,
) -> str:
    """`text` with its engine command line (the last ExecStart= of [Service]) replaced by
    `exec_start_line` and the Environment= assignments that differ between `old_env` and
    `new_env` moved to their new values; every other line byte for byte as it was, earlier
    ExecStart= lines included. With a `drain_grace`, systemd's stop timeout is set longer than
    it (the last TimeoutStopSec= rewritten, or one added); without, the unit's own stays."""
    check_environment(new_env)
    changed = {k for k in set(old_env) | set(new_env) if old_env.get(k) != new_env.get(k)}
    lines = _lines(text)
    starts = [i for i, line in enumerate(lines) if _is_service_key(line, "ExecStart")]
    if not starts:
        raise UnitNotRewritable("the unit has no ExecStart= in its [Service] section")
    engine_line = lines[starts[-1]]
    old_value = engine_line.logical.split("=", 1)[1].strip()
    if not old_value:
        raise UnitNotRewritable(
            f"line {line_number(lines, starts[-1])}: the last ExecStart= is empty (it clears "
            "the command lines before it), so there is no engine command line to rewrite"
        )
    prefix = _EXEC_PREFIX_RE.match(old_value)
    stop_at, stop_line = _stop_timeout_line(lines, starts[-1], drain_grace)
    out: list[str] = []
    for i, line in enumerate(lines):
        if i == stop_at:
            out.append(stop_line)
            if _is_service_key(line, "TimeoutStopSec"):
                continue
        if i == starts[-1]:
            out += [_environment_line(n, new_env[n]) for n in sorted(changed) if n in new_env]
            out.append(f"ExecStart={prefix.group(0) if prefix else ''}{exec_start_line}\n")
        elif changed and _is_service_key(line, "Environment"):
            out += _without(line, changed)
        elif unit and line.section == "Unit" and _RENDERED_DESCRIPTION_RE.fullmatch(line.logical):
            out.append(f"Description={description(unit)}\n")
        else:
            out += line.raw
    if stop_at == len(lines):  # after a TimeoutSec= on the file's last line
        out.append(stop_line)
    return "".join(out)


def _stop_timeout_line(lines: list[_Line], engine_line: int, drain_grace: int) -> tuple[int, str]:
    """Where the stop timeout goes and what it says ((-1, "") without a drain grace): in place
    of the last TimeoutStopSec= when no TimeoutSec= follows it, else after the last of the two
    (systemd takes the last assignment), else before the engine's command line."""
    if not check_drain_grace(drain_grace):
        return -1, ""
    line = f"TimeoutStopSec={timeout_stop_seconds(drain_grace)}\n"
    timeouts = [
        i
        for i, found in enumerate(lines)
        if _is_service_key(found, "TimeoutStopSec") or _is_service_key(found, "TimeoutSec")
    ]
    if not timeouts:
        return engine_line, line
    last = timeouts[-1]
    if _is_service_key(lines[last], "TimeoutStopSec"):
        return last, line
    return last + 1, line  # right after a TimeoutSec=, which set both timeouts


def line_number(lines: list[_Line], index: int) -> int:
    return sum(len(line.raw) for line in lines[:index]) + 1


@dataclass(frozen=True)
class Directive:
    """One assignment of a unit file: where it is, and what it says."""

    section: str
    key: str
    value: str
    line: int  # 1-based, of its first physical line

    def describe(self) -> str:
        return f"line {self.line}: [{self.section}] {self.key}={self.value}"


def directives(text: str) -> list[Directive]:
    """Every assignment of a unit file, in order, continuations joined."""
    found: list[Directive] = []
    lines = _lines(text)
    for i, line in enumerate(lines):
        key = line.key()
        if key is not None:
            value = line.logical.split("=", 1)[1].strip()
            found.append(Directive(line.section, key, value, line_number(lines, i)))
    return found


# Directives that change neither what runs, as whom, from where, nor how it is reached. Any
# other difference between two units (Exec*=, Type=, User=, Group=, EnvironmentFile=,
# WorkingDirectory=, ...) needs the approval a model swap needs: an allowlist, so a directive
# no one thought of is reviewed rather than waved through.
HARMLESS_DIRECTIVES = frozenset(
    {
        ("Unit", "Description"),
        ("Unit", "Documentation"),
        ("Service", "Restart"),
        ("Service", "RestartSec"),
        ("Service", "TimeoutStartSec"),
        ("Service", "TimeoutStopSec"),
        ("Service", "TimeoutSec"),
        ("Service", "LimitNOFILE"),
        ("Service", "LimitMEMLOCK"),
    }
)


def decisive(directive: Directive) -> bool:
    """Whether a directive decides what runs or how it is exposed (see HARMLESS_DIRECTIVES).
    Environment= is compared by value (environment_of), the engine's ExecStart= by what it
    serves (serving_plan), so both are decisive here too."""
    return (directive.section, directive.key) not in HARMLESS_DIRECTIVES


def _is_service_key(line: _Line, key: str) -> bool:
    return line.section == "Service" and line.key() == key


def _without(line: _Line, names: set[str]) -> list[str]:
    """An Environment= line without the assignments of `names` (the line as it was when it
    has none of them; nothing when it had only those)."""
    words = _split(line.logical.split("=", 1)[1])
    kept = [w for w in words if w.partition("=")[0] not in names]
    if len(kept) == len(words):
        return line.raw
    return ["Environment=" + " ".join(shlex.quote(w) for w in kept) + "\n"] if kept else []


def exec_start_of(text: str) -> str | None:
    """The last ExecStart= value of the [Service] section, continuations joined."""
    value = None
    for line in _lines(text):
        if line.section == "Service" and line.key() == "ExecStart":
            value = line.logical.split("=", 1)[1].strip() or None
    return value


def unit_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
