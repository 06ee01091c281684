"""The simulator's `vllm serve` flag table is the pinned vLLM's own parser, trimmed.

simulator/vllm_cli/vllm-0.32.0-flags.json is made from the capture of vLLM 0.32.0's parser
(tests/real_engine/captures/vllm-0.32.0-flags.json, which tests/real_engine/test_flags.py holds
to the parser itself): every option string, its dest, what argparse does with it, its converter,
nargs, choices and default. The simulator reads that file and builds its argparse parser from it,
so its option set, abbreviations and type errors are vLLM's. When vLLM is bumped, refresh the
capture, then

    python tests/simulator/test_vllm_flag_table.py       # rewrite the simulator's table
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "tests" / "real_engine" / "captures" / "vllm-0.32.0-flags.json"
TABLE = ROOT / "simulator" / "vllm_cli" / "vllm-0.32.0-flags.json"

_ACTIONS = {
    "_StoreAction": "store",
    "BooleanOptionalAction": "bool",
    "_StoreTrueAction": "true",
    "_AppendAction": "append",
    "LoRAParserAction": "store",  # parses name=path entries after argparse: stored as given
    "DeprecatedLogConfigFileAction": "store",  # warns, then stores
}
_CONVERTERS = {
    None: "none",
    "str": "str",
    "int": "int",
    "float": "float",
    "json.loads": "loads",
    "vllm.utils.argparse_utils.human_readable_int": "hint",
    "vllm.utils.argparse_utils.human_readable_int_or_auto": "hint_or_auto",
    "vllm.engine.arg_utils.union_dict_and_str": "dict_or_str",
}
_PARSE_TYPE = "vllm.engine.arg_utils.parse_type.<locals>._parse_type"
_OPTIONAL = "vllm.engine.arg_utils.optional_type.<locals>._optional_type"
_DATACLASS = "vllm.engine.arg_utils._compute_kwargs.<locals>.parse_dataclass"
_LAMBDA = "vllm.engine.arg_utils.EngineArgs.add_cli_args.<locals>.<lambda>"
_SUPPRESS = "==SUPPRESS=="  # argparse.SUPPRESS: the dest is absent unless given
# vLLM's inline converters, by the option they belong to (their source in arg_utils.py).
_LAMBDAS = {
    "device_ids": "device_ids",  # "2,3,GPU-..." as a list, digits as ints
    "moe_backend": "lower",  # s.lower().replace("-", "_")
    "linear_backend": "lower",
    "sparse_indexer_topk_backend": "lower",
}


def _converter(chain: list[str | None], dest: str) -> str:
    head, *rest = chain
    if head == _PARSE_TYPE and rest == ["json.loads"]:
        return "json"
    if head == _DATACLASS:
        return "config:" + str(rest[0]).rsplit(".", 1)[-1]
    if head == _LAMBDA:
        return _LAMBDAS[dest]  # a KeyError here: a new inline converter to read and name
    if head not in _CONVERTERS or rest:
        raise ValueError(f"{dest}: no converter for {chain}")
    return _CONVERTERS[head]


def table_from_capture(capture: dict[str, Any]) -> dict[str, Any]:
    """What the simulator needs of each option, in vLLM's registration order."""
    options = []
    for option in capture["options"]:
        if not option["option_strings"]:
            continue  # model_tag: the parser adds the positional itself
        action = _ACTIONS[option["action"]]
        names = option["option_strings"]
        if action == "bool":  # argparse adds --no-x itself
            names = [n for n in names if not n.startswith("--no-")]
        entry: dict[str, Any] = {"names": names, "dest": option["dest"], "action": action}
        if action in ("store", "append"):
            chain = [option["type"], *option["type_wraps"]]
            optional = chain[0] == _OPTIONAL
            entry["type"] = _converter(chain[1:] if optional else chain, option["dest"])
            entry["optional"] = optional
            entry["nargs"] = option["nargs"]
            if option["nargs"] == "?":
                entry["const"] = option["const"]
        entry["choices"] = option["choices"]
        entry["default"] = option["default"]
        default = option["default"]
        if str(entry.get("type")).startswith("config:") and default not in (None, _SUPPRESS):
            # A config object (the capture has its repr): argparse must not parse it as JSON.
            entry["default"] = {"object_repr": option["default"]}
        options.append(entry)
    return {
        "vllm_version": capture["vllm_version"],
        "made_from": "tests/real_engine/captures/vllm-0.32.0-flags.json "
        "(python tests/simulator/test_vllm_flag_table.py)",
        "options": options,
    }


def table_text(capture: dict[str, Any]) -> str:
    """The data file's bytes: one option a line, so a new release's diff reads option by option."""
    table = table_from_capture(capture)
    lines = [json.dumps(option, ensure_ascii=False) for option in table["options"]]
    head = {k: v for k, v in table.items() if k != "options"}
    return (
        json.dumps(head, ensure_ascii=False)[:-1]
        + ', "options": [\n'
        + ",\n".join(lines)
        + "\n]}\n"
    )


def _capture() -> dict[str, Any]:
    return dict(json.loads(CAPTURE.read_text(encoding="utf-8")))


def test_the_simulators_table_is_the_capture_trimmed() -> None:
    from simulator.vllm_cli import flags

    assert flags.TABLE == TABLE
    assert TABLE.read_text(encoding="utf-8") == table_text(_capture()), (
        "the simulator's flag table is not the capture's: rewrite it with "
        "`python tests/simulator/test_vllm_flag_table.py`"
    )


def test_the_simulator_has_exactly_vllms_options() -> None:
    from simulator.vllm_cli import LONG_FLAGS, flags
    from simulator.vllm_cli.parser import parsers

    capture = _capture()
    assert capture["vllm_version"] == "0.32.0"
    _main, serve = parsers()
    theirs = {name for option in capture["options"] for name in option["option_strings"]}
    ours = set(serve._option_string_actions) - {"-h", "--help"}
    assert sorted(ours - theirs) == [] and sorted(theirs - ours) == []
    assert set(LONG_FLAGS) == {n for n in theirs if n.startswith("--")} - {
        n for n in theirs if n.startswith("--no-") and n[5:] and f"--{n[5:]}" in theirs
    }
    # Registration order decides argparse's "could match" lists and "non-default args".
    order = [o["option_strings"][0] for o in capture["options"] if o["option_strings"]]
    assert [f.names[0] for f in flags.FLAGS] == order


def test_each_option_reads_as_vllm_reads_it() -> None:
    """dest, nargs, choices, default, the action's kind and the converter's name (argparse puts
    it in "invalid <name> value") for every option."""
    from simulator.vllm_cli import flags
    from simulator.vllm_cli.parser import parsers

    _main, serve = parsers()
    by_flag = {s: a for a in serve._actions for s in a.option_strings}
    for option in _capture()["options"]:
        if not option["option_strings"]:
            continue
        ours = by_flag[option["option_strings"][0]]
        where = option["option_strings"][0]
        assert ours.dest == option["dest"], where
        assert list(ours.option_strings) == option["option_strings"], where
        assert ours.nargs == option["nargs"], where
        assert (None if ours.choices is None else list(ours.choices)) == option["choices"], where
        default = _SUPPRESS if ours.default is argparse.SUPPRESS else ours.default
        if isinstance(default, flags.ObjectDefault):
            default = repr(default)
        assert default == option["default"], where
        kind = type(ours).__name__
        if option["action"] in ("LoRAParserAction", "DeprecatedLogConfigFileAction"):
            assert kind == "_StoreAction", where
        else:
            assert kind == option["action"], where
        theirs_type = (option["type"] or "").rsplit(".", 1)[-1] or None
        ours_type = None if ours.type is None else getattr(ours.type, "__name__", None)
        assert ours_type == theirs_type, where


if __name__ == "__main__":
    TABLE.write_text(table_text(_capture()), encoding="utf-8")
    print(f"wrote {TABLE.relative_to(ROOT)}")
