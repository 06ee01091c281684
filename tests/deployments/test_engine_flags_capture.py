"""The product's flag tables held to the pinned vLLM's own `vllm serve` parser.

tests/real_engine/captures/vllm-0.32.0-flags.json is that parser dumped (every option string,
its dest, type, choices, default and help; tests/real_engine/test_flags.py keeps it current).
Read here without vLLM, so these run in `make quick`: the next vLLM bump refreshes the capture,
and whatever it adds or renames fails here until the tables say what it is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from deployments import fit
from deployments.unit_files import engine_flags as ef
from deployments.unit_files.serving_plan import plan_changes, plan_from_argv
from hosts.state import HostState
from tests import factories as f

CAPTURE = Path(__file__).parents[1] / "real_engine" / "captures" / "vllm-0.32.0-flags.json"
DOCUMENT: dict[str, Any] = json.loads(CAPTURE.read_text(encoding="utf-8"))
OPTIONS = [o for o in DOCUMENT["options"] if o["option_strings"]]  # model_tag is positional
BY_FLAG = {name: option for option in OPTIONS for name in option["option_strings"]}
LONG = {name for name in BY_FLAG if name.startswith("--")}
VLLM = ["/opt/vllm/.venv/bin/vllm", "serve", "/models/m"]


def _first(option: dict[str, Any]) -> str:
    return str(option["option_strings"][0])


def _negation(name: str, option: dict[str, Any]) -> bool:
    return option["action"] == "BooleanOptionalAction" and name.startswith("--no-")


def test_the_capture_is_the_pinned_vllms() -> None:
    assert DOCUMENT["vllm_version"] == "0.32.0" and len(OPTIONS) == 316


def test_every_flag_the_product_names_is_vllms_or_sglangs() -> None:
    named = {*ef.KNOWN, *ef.ALIASES.values(), *ef.SHORT_OPTIONS.values()}
    assert sorted(named - LONG - ef.SGLANG_FLAGS) == []
    # SGLang's list holds SGLang's own flags only, and none of them begins a vLLM flag (vLLM
    # would read it as an abbreviation of that flag).
    assert sorted(ef.SGLANG_FLAGS & LONG) == []
    assert [(s, v) for s in ef.SGLANG_FLAGS for v in LONG if v.startswith(s)] == []
    # A flag named only to be refused is one vLLM no longer has.
    assert sorted(set(ef.REMOVED) & LONG) == []


def test_no_flag_of_vllms_reads_as_a_longer_one() -> None:
    """argparse takes an exact name before an abbreviation: a vLLM flag the product does not
    know must not begin a flag it knows, or the product would rewrite it into that flag
    (`--reasoning-parser` into `--reasoning-parser-plugin`)."""
    known = set(ef.KNOWN)
    assert [(v, k) for v in sorted(LONG - known) for k in known if k.startswith(v)] == []
    assert ef.resolve_flag("--reasoning-parser") == "--reasoning-parser"
    assert ef.normalise_extra_args(["--reasoning-parser", "qwen3"]) == ["--reasoning-parser=qwen3"]


def test_every_second_name_reads_as_its_flag() -> None:
    """One dest, several option strings: the product reads them all as one flag."""
    for option in OPTIONS:
        names = [n for n in option["option_strings"] if n.startswith("--")]
        canonical = {ef.base_flag(ef.resolve_flag(n)) for n in names}
        assert len(canonical) == 1, (names, canonical)
        for short in (n for n in option["option_strings"] if not n.startswith("--")):
            assert ef.SHORT_OPTIONS.get(short) == _first(option), short
    shorts = {n for n in BY_FLAG if not n.startswith("--")}
    assert set(ef.SHORT_OPTIONS) == shorts


@pytest.mark.parametrize("spelled", ["--device-memory-utilization", "--device_memory_util"])
def test_a_second_name_of_the_memory_share_is_the_memory_share(spelled: str) -> None:
    assert BY_FLAG["--device-memory-utilization"] is BY_FLAG["--gpu-memory-utilization"]
    # Its value is checked as the share's is, and stored under the share's name.
    with pytest.raises(ef.EngineArgRefused, match="--gpu-memory-utilization must be a number"):
        ef.check_extra_args([f"{spelled}=1.5"])
    assert ef.check_extra_args([spelled, "0.5"]) == ["--gpu-memory-utilization=0.5"]
    # A unit that spells it so is read as the share: the fit check sizes it and an approver
    # sees a change of the GPU memory share, not an unknown flag.
    plan = plan_from_argv([*VLLM, spelled, "0.99"])
    assert plan.memory_fraction == 0.99 and plan.flags == {}
    (change,) = plan_changes(plan_from_argv(VLLM), plan)
    assert change.describe() == "GPU memory share: unset → 0.99"
    assert change.why == "changes the memory needed"


def test_short_options_in_a_unit_read_as_their_flags() -> None:
    plan = plan_from_argv([*VLLM, "-sc", '{"model":"/models/draft"}', "-ep", "-cc.mode", "3"])
    assert set(plan.flags) == {"--speculative-config", "--enable-expert-parallel",
                               "--compilation-config.mode"}  # fmt: skip
    whys = {c.what: c.why for c in plan_changes(plan_from_argv(VLLM), plan)}
    assert whys["--speculative-config"].startswith("loads a second model")
    assert whys["--compilation-config.mode"].startswith("can name Python code")
    assert whys["--enable-expert-parallel"] == "not listed in HARMLESS_ENGINE_FLAGS"


def test_the_fit_check_assumes_vllms_own_default_share() -> None:
    assert fit.default_memory_fraction("vllm") == BY_FLAG["--gpu-memory-utilization"]["default"]
    assert fit.default_memory_fraction("sglang") == 0.9  # SGLang's, as the code always assumed
    state = HostState.from_json(f.parsed_state(used_mib=0))
    checked = fit.model_fits(
        state=state, weights_gib=80, plan=plan_from_argv(VLLM), unit=f.UNIT, kv_reserve_gib=4
    )
    assert checked.budget_per_gpu_gib == pytest.approx(97887 / 1024 * 0.92)


def test_a_flag_vllm_no_longer_has_is_refused_in_words() -> None:
    assert "--disable-log-requests" not in BY_FLAG
    assert BY_FLAG["--enable-log-requests"]["default"] is False
    message = (
        "vLLM 0.32 no longer has --disable-log-requests (logging requests is off by default; "
        "--enable-log-requests turns it on)"
    )
    for spelled in (["--disable-log-requests"], ["--disable_log_requests"], ["--disable-log-r"]):
        with pytest.raises(ef.EngineArgRefused) as refused:
            ef.check_extra_args(spelled)
        assert str(refused.value) == message
    # The abbreviation vLLM reads as --disable-log-stats is read so here too.
    assert ef.check_extra_args(["--disable-log"]) == ["--disable-log-stats"]
    # A unit that still has it is read with it as a switch (it was one).
    assert plan_from_argv([*VLLM, "--disable-log-requests", "x"]).flags == {
        "--disable-log-requests": None
    }


def test_switches_are_the_engines_switches() -> None:
    for flag in ef.KNOWN:
        option = BY_FLAG.get(flag)
        if option is not None:
            assert (flag in ef.BOOLEAN) == (option["nargs"] == 0), flag


def test_every_choice_the_engine_takes_is_taken() -> None:
    for flag, (_words, _check) in ef.VALUES.items():
        option = BY_FLAG.get(flag)
        for choice in (option or {}).get("choices") or ():
            assert ef.check_extra_args([f"{flag}={choice}"]) == [f"{flag}={choice}"]


# What the help text or the dest says an option does that an approver must be told: it loads
# code (a class, a module, a plugin, an import path), opens a port, or talks to an address.
_DANGER = {
    "loads code": re.compile(
        r"\b(class|classes|plugins?|modules?|import path|qualified|callable|code)\b", re.I
    ),
    "opens a port": re.compile(r"\bports?\b", re.I),
    "talks to an address": re.compile(
        r"\b(endpoints?|urls?|uris?|host:port|address|addr|zmq|tcp)\b"
        r"|https?://(?!docs\.vllm\.ai|docs\.ray\.io|arxiv\.org)",
        re.I,
    ),
}
# Options the scan matches that do none of it, and why (each one read in the capture's help).
_NOT_DANGEROUS = {
    "--tool-call-parser": "picks a parser by name; a plugin's comes from --tool-parser-plugin",
    "--cohere-is-reasoning-model": "how one endpoint's answers are shaped",
    "--dp-supervisor-probe-interval-s": "timing of the supervisor --data-parallel-supervisor-port"
    " opens",
    "--dp-supervisor-probe-timeout-s": "timing of the supervisor's probes",
    "--dp-supervisor-probe-failure-threshold": "counting of the supervisor's probes",
    "--disable-fastapi-docs": "turns documentation endpoints off",
    "--prefix-match-unit": "a token count for prefix-cache keys",
    "--lora-target-modules": "the model's layers, not Python modules",
    "--enable-layerwise-nvtx-tracing": "the model's layers, not Python modules",
}
# Options whose value is JSON or a config object: what their fields do is not in the help, so
# each was read in vLLM 0.32's config classes; these set nothing an approver must be told.
_PLAIN_CONFIGS = {
    "--return-tokens-as-token-ids": "a switch (its help mentions JSON)",
    "--pooler-config": "pooling types and sizes",
    "--eplb-config": "expert load balancing windows and policy",
    "--fault-tolerance-config": "a recovery timeout",
    "--limit-mm-per-prompt": "counts and sizes of multimodal items",
    "--media-io-kwargs": "media decoding settings (frames, sizes)",
    "--mm-processor-kwargs": "multimodal processor settings (crops, sizes)",
    "--custom-histogram-buckets": "metric bucket bounds",
    "--ir-op-priority": "the order of kernel implementations",
    "--diffusion-config": "canvas length and denoising steps",
    "--attention-config": "attention backends and their sizes",
    "--engram-config": "n-gram embedding placement",
    "--reasoning-config": "reasoning start and end strings",
    "--kernel-config": "kernel backends and warm-up",
    "--aux-output-config": "routed-expert outputs and their size",
    "--pt-load-map-location": "which device checkpoint tensors are read onto",
}


def _json_valued(option: dict[str, Any]) -> bool:
    converts = [option["type"] or "", *option["type_wraps"]]
    return (
        option["dest"].endswith("_config")
        or "JSON" in option["help"]
        or any(c.startswith("vllm.config.") or c in ("json.loads",) for c in converts)
        or option["type"] == "vllm.engine.arg_utils.union_dict_and_str"
    )


def test_every_option_that_loads_code_listens_or_sends_is_sensitive() -> None:
    classified = {*ef.SENSITIVE, *ef.RESERVED}
    unclassified = {}
    for option in OPTIONS:
        flag = _first(option)
        text = f"{option['help']} {option['dest'].replace('_', ' ')}"
        said = [what for what, pattern in _DANGER.items() if pattern.search(text)]
        if _json_valued(option) and flag not in _PLAIN_CONFIGS:
            said.append("takes a config the help does not spell out")
        if said and flag not in classified and flag not in _NOT_DANGEROUS:
            unclassified[flag] = said
    assert unclassified == {}
    # The exemptions are options vLLM has, and the product does not also call them sensitive.
    for flag in (*_NOT_DANGEROUS, *_PLAIN_CONFIGS):
        assert flag in BY_FLAG and flag not in classified, flag


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        ("--worker-cls", "imports and runs Python code"),
        ("--worker-extension-cls", "imports and runs Python code"),
        ("--scheduler-cls", "imports and runs Python code"),
        ("--logits-processors", "imports and runs Python code"),
        ("--model-class-overrides", "imports and runs Python code"),
        ("--reasoning-parser-plugin", "imports and runs Python code"),
        ("--logging-config", "can name Python code"),
        ("--grpc", "serves gRPC"),
        ("--grpc-port", "opens another network listener"),
        ("--enable-scale-out", "adds endpoints"),
        ("--otlp-traces-endpoint", "sends data off the host"),
        ("--tool-server", "tool servers"),
        ("--kv-events-config", "sends data off the host"),
        ("--spec-model", "loads a second model"),
        ("--speculative-config", "loads a second model"),
        ("--device-ids", "changes which GPUs serve"),
        ("--kv-cache-memory-bytes", "past the share the fit check reads"),
    ],
)
def test_the_approver_reads_what_a_dangerous_flag_does(flag: str, words: str) -> None:
    assert flag in BY_FLAG
    value = [] if BY_FLAG[flag]["nargs"] == 0 else ["x"]
    (change,) = plan_changes(plan_from_argv(VLLM), plan_from_argv([*VLLM, flag, *value]))
    assert words in change.why, change.why
    assert ef.check_harmless_list([flag]) == [f"{flag} can never be harmless: it {change.why}"]
