"""What a unit serves, read from its command line the way the engine reads it, and what
differs between two units. Pure: text in, dataclasses out.

Approvals compare these plans (deployments.policy), the fit check sizes them
(deployments.fit), and revisions are read back through them.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from hosts.parsers.unit_files import expand_variables

from . import units
from .engine_flags import (
    FIT,
    SHORT_OPTIONS,
    EngineArgRefused,
    base_flag,
    check_harmless_list,
    is_switch,
    resolve_flag,
    sensitive_reason,
)


@dataclass(frozen=True)
class ServingPlan:
    """What an engine command line makes the server do, as far as approvals and fit care."""

    engine: str  # vllm | sglang | unknown
    binary: str | None = None  # the program ExecStart runs
    model: str | None = None
    served_names: tuple[str, ...] = ()
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    max_model_len: int | None = None
    port: int | None = None
    host: str | None = None  # None: the engine's default (every interface)
    memory_fraction: float | None = None
    # vLLM's --shutdown-timeout: how long a stopping server drains (None: not given, 0: abort).
    shutdown_timeout: int | None = None
    flags: dict[str, str | None] = field(default_factory=dict)  # every other flag, canonical

    @property
    def gpus_needed(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size

    @property
    def weight_shards(self) -> int:
        """Each GPU holds 1/(tp*pp) of the weights; data-parallel replicas each hold a copy."""
        return self.tensor_parallel_size * self.pipeline_parallel_size


_IDENTITY = {
    "--model": "model",
    "--model-path": "model",
    "--served-model-name": "served_names",
    "--tensor-parallel-size": "tensor_parallel_size",
    "--tp-size": "tensor_parallel_size",
    "--pipeline-parallel-size": "pipeline_parallel_size",
    "--pp-size": "pipeline_parallel_size",
    "--data-parallel-size": "data_parallel_size",
    "--dp-size": "data_parallel_size",
    "--max-model-len": "max_model_len",
    "--context-length": "max_model_len",
    "--port": "port",
    "--host": "host",
    # Its second name, --device-memory-utilization, is read as it (engine_flags.ALIASES).
    "--gpu-memory-utilization": "memory_fraction",
    "--mem-fraction-static": "memory_fraction",
    "--shutdown-timeout": "shutdown_timeout",
}


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _engine_of(argv: Sequence[str]) -> tuple[str, list[str]]:
    """Which engine a command line starts, and the words after its sub-command."""
    binary = argv[0].rsplit("/", 1)[-1]
    rest = list(argv[1:])
    if binary == "vllm" and rest[:1] == ["serve"]:
        return "vllm", rest[1:]
    if rest[:2] == ["-m", "sglang.launch_server"]:
        return "sglang", rest[2:]
    if rest[:2] == ["-m", "vllm.entrypoints.openai.api_server"]:
        return "vllm", rest[2:]
    return "unknown", rest


def _read_words(words: list[str]) -> tuple[str | None, list[tuple[str, list[str]]]]:
    """The first positional word, and each flag (canonical) with the values it took, in
    order: argparse's last occurrence wins, so order matters."""
    positional: str | None = None
    seen: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-"):
            positional = positional or word
            continue
        spelled, eq, value = word.partition("=")
        flag = _flag_of(spelled)
        taken = [value] if eq else []
        many = flag == "--served-model-name"  # nargs="+"
        while not eq and not is_switch(flag) and i < len(words):
            if words[i].startswith("-") or (taken and not many):
                break
            taken.append(words[i])
            i += 1
        seen.append((flag, taken))
    return positional, seen


def _flag_of(spelled: str) -> str:
    """A word's flag as the engine reads it: short options and second names as the flag they
    stand for; a dotted `--x.key` (folded into `--x`'s JSON by vLLM) keeps its key."""
    name, dot, key = spelled.partition(".")
    name = SHORT_OPTIONS.get(name, name)
    try:
        flag = resolve_flag(name)
    except EngineArgRefused:
        flag = name.replace("_", "-")
    return f"{flag}{dot}{key}"


def plan_from_argv(argv: Sequence[str]) -> ServingPlan:
    """Read an ExecStart command line (already split into words) as the engine would."""
    if not argv:
        return ServingPlan(engine="unknown")
    engine, rest = _engine_of(argv)
    if engine == "unknown":
        return ServingPlan(engine="unknown", binary=argv[0], flags={"argv": shlex.join(argv)})
    positional, seen = _read_words(rest)

    def last(target: str) -> list[str] | None:
        found = [taken for flag, taken in seen if _IDENTITY.get(flag) == target]
        return found[-1] if found else None

    def one(target: str) -> str | None:
        taken = last(target)
        return taken[0] if taken else None

    model = positional if engine == "vllm" and positional else one("model")
    flags: dict[str, str | None] = {}
    for flag, taken in seen:
        if flag not in _IDENTITY:
            flags[flag] = taken[0] if taken else None
    return ServingPlan(
        engine=engine,
        binary=argv[0],
        model=model,
        served_names=tuple(last("served_names") or ([model] if model else [])),
        tensor_parallel_size=_int(one("tensor_parallel_size"), 1),
        pipeline_parallel_size=_int(one("pipeline_parallel_size"), 1),
        data_parallel_size=_int(one("data_parallel_size"), 1),
        max_model_len=_int_or_none(one("max_model_len")),
        port=_int(one("port"), 8000 if engine == "vllm" else 30000),
        host=one("host"),
        memory_fraction=_float(one("memory_fraction")),
        shutdown_timeout=_int_or_none(one("shutdown_timeout")),
        flags=flags,
    )


def unit_plan(text: str, file_variables: dict[str, str] | None = None) -> ServingPlan:
    """plan_from_unit_text, remembered by content: a probe round decides every host's verdict
    from its serving revision's plan, and a revision's unit never changes once written, so
    each worker reads each unit once rather than on every probe (about 0.1 ms a unit). The
    plan returned is shared: nothing may change it (or its `flags`) in place."""
    return _unit_plan(text, tuple(sorted((file_variables or {}).items())))


@functools.lru_cache(maxsize=4096)
def _unit_plan(text: str, file_variables: tuple[tuple[str, str], ...]) -> ServingPlan:
    return plan_from_unit_text(text, dict(file_variables))


def plan_from_unit_text(text: str, file_variables: dict[str, str] | None = None) -> ServingPlan:
    """The plan of the unit's command line (its last ExecStart=, systemd's rule for
    Type=simple), with ${VAR} and $VAR expanded from its Environment= lines and, over them, the
    variables its EnvironmentFile= set (`file_variables`), as systemd expands them."""
    command = units.exec_start_of(text) or ""
    command = command.lstrip("-@:+!")
    variables = {**units.environment_of(text), **(file_variables or {})}
    try:
        return plan_from_argv(expand_variables(shlex.split(command), variables))
    except ValueError:
        return ServingPlan(engine="unknown", flags={"argv": command})


@dataclass(frozen=True)
class PlanChange:
    """One difference between what serves now and what a change would serve."""

    what: str
    before: object
    after: object
    why: str  # why it needs approval, or "" when an administrator marked it harmless

    def describe(self) -> str:
        return f"{self.what}: {_show(self.before)} → {_show(self.after)}"


def _show(value: object) -> str:
    if value is None or value == ():
        return "unset"
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


_IDENTITY_FIELDS = (
    ("engine", "engine", "changes what serves"),
    ("binary", "engine program", "changes the program that serves"),
    ("model", "model", "changes what serves"),
    ("served_names", "served model name", "changes what clients call"),
    ("tensor_parallel_size", "tensor-parallel size", "changes the GPUs and memory needed"),
    ("pipeline_parallel_size", "pipeline-parallel size", "changes the GPUs and memory needed"),
    ("data_parallel_size", "data-parallel size", "changes the GPUs and memory needed"),
    ("max_model_len", "max model length", "changes the memory needed and what serves"),
    ("port", "port", "changes how the server is reached"),
    ("host", "bind address", "changes who can reach the server"),
    ("memory_fraction", "GPU memory share", "changes the memory needed"),
)


def plan_changes(
    before: ServingPlan, after: ServingPlan, *, harmless: Iterable[str] = ()
) -> list[PlanChange]:
    """Every difference between two plans; `why` is empty only for flags marked harmless."""
    harmless_flags = {resolve_flag(h) for h in harmless if not check_harmless_list([h])}
    memory_harmless = bool(harmless_flags & set(FIT))
    changes = [
        PlanChange(
            label,
            getattr(before, attr),
            getattr(after, attr),
            "" if attr == "memory_fraction" and memory_harmless else why,
        )
        for attr, label, why in _IDENTITY_FIELDS
        if getattr(before, attr) != getattr(after, attr)
    ]
    if before.shutdown_timeout != after.shutdown_timeout:
        # Shown, and harmless (deployments.policy says why): it decides how long a stopping
        # server lets its requests finish, nothing about what serves or who reaches it.
        changes.append(
            PlanChange(
                "drain grace (--shutdown-timeout)",
                before.shutdown_timeout,
                after.shutdown_timeout,
                "",
            )
        )
    for flag in sorted(set(before.flags) | set(after.flags)):
        old, new = before.flags.get(flag, _ABSENT), after.flags.get(flag, _ABSENT)
        if old == new:
            continue
        base = base_flag(flag).partition(".")[0]
        reason = sensitive_reason(flag)
        if reason is not None:
            why = reason
        elif flag in harmless_flags or base in harmless_flags:
            why = ""
        else:
            why = "not listed in HARMLESS_ENGINE_FLAGS"
        changes.append(PlanChange(flag, _flag_state(old), _flag_state(new), why))
    return changes


class _Absent:
    def __repr__(self) -> str:
        return "absent"


_ABSENT = _Absent()


def _flag_state(value: object) -> object:
    if value is _ABSENT:
        return None
    return "set" if value is None else value


_DIRECTIVE_WHY = {
    "ExecStart": "changes what runs",
    "ExecStartPre": "changes what runs before the engine",
    "ExecStartPost": "changes what runs after the engine starts",
    "ExecCondition": "changes what runs before the engine",
    "ExecReload": "changes what runs on reload",
    "ExecStop": "changes what runs on stop",
    "ExecStopPost": "changes what runs after stop",
    "Type": "changes how systemd runs the command lines",
    "User": "changes whom the engine runs as",
    "Group": "changes whom the engine runs as",
    "DynamicUser": "changes whom the engine runs as",
    "SupplementaryGroups": "changes whom the engine runs as",
    "EnvironmentFile": "changes where the engine's settings come from",
    "WorkingDirectory": "changes where the engine runs",
    "RootDirectory": "changes where the engine runs",
}


def unit_differences(
    before: str,
    after: str,
    *,
    before_variables: dict[str, str] | None = None,
    after_variables: dict[str, str] | None = None,
    harmless: Iterable[str] = (),
) -> list[PlanChange]:
    """Everything two unit files differ in that decides what runs, as whom, and how it is
    reached: the engine's command line (the last ExecStart=) read as the engine reads it, the
    environment by value, and every other directive not listed in units.HARMLESS_DIRECTIVES
    as written, in order (earlier ExecStart= lines, ExecStartPre=, Type=, User=, ...). The one
    comparison that approvals, rollbacks and the revision diff use; `why` is empty only for
    engine flags an administrator marked harmless."""
    changes = plan_changes(
        plan_from_unit_text(before, before_variables),
        plan_from_unit_text(after, after_variables),
        harmless=harmless,
    )
    env_before, env_after = units.environment_of(before), units.environment_of(after)
    for name in sorted(set(env_before) | set(env_after)):
        if env_before.get(name) != env_after.get(name):
            changes.append(
                PlanChange(
                    f"environment {name}",
                    env_before.get(name),
                    env_after.get(name),
                    "changes how the engine runs",
                )
            )
    old, new = _decisive_lines(before), _decisive_lines(after)
    for section, key in dict.fromkeys([*old, *new]):
        was, now = old.get((section, key), []), new.get((section, key), [])
        if was != now:
            why = _DIRECTIVE_WHY.get(key, "changes how the unit runs (not a harmless directive)")
            label = f"[{section}] {key}="
            if key == "ExecStart":
                label += " (besides the engine's)"
            changes.append(PlanChange(label, _lines_shown(was), _lines_shown(now), why))
    return changes


def _decisive_lines(text: str) -> dict[tuple[str, str], list[str]]:
    """Each decisive directive's values in order; Environment= and the engine's command line
    (the last ExecStart= of [Service]) are compared by what they mean, so left out here."""
    found = [d for d in units.directives(text) if units.decisive(d) and d.key != "Environment"]
    engine = [i for i, d in enumerate(found) if (d.section, d.key) == ("Service", "ExecStart")]
    if engine:
        del found[engine[-1]]
    grouped: dict[tuple[str, str], list[str]] = {}
    for directive in found:
        grouped.setdefault((directive.section, directive.key), []).append(directive.value)
    return grouped


def _lines_shown(values: list[str]) -> str | None:
    return " ⏎ ".join(values) if values else None
