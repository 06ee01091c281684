"""The simulator reads `vllm serve` command lines as the pinned vLLM does.

tests/real_engine/captures/vllm-0.32.0-serve-argv.json is vLLM 0.32.0's own parser run over a
few hundred command lines (tests/real_engine/dump_serve_argv.py: the simulator's examples, the
spellings the control plane relies on, and seeded random words over every option string): the
usage error it prints, what FlexibleArgumentParser raises, or the options that end up different
from their defaults. The simulator must answer each the same way, before any file is read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from simulator.vllm_cli import flags
from simulator.vllm_cli.engine_args import CliCrash
from simulator.vllm_cli.flexible import flexible
from simulator.vllm_cli.parser import HelpExit, UsageError, has_option, parsers

CAPTURE = Path(__file__).parents[1] / "real_engine" / "captures" / "vllm-0.32.0-serve-argv.json"
DOCUMENT: dict[str, Any] = json.loads(CAPTURE.read_text(encoding="utf-8"))
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")

# Options whose parsed value is a vLLM object (a config dataclass, LoRA module paths): the
# capture has its repr, the simulator the JSON it was given. Whether they were set is compared.
_OBJECTS = {f.dest for f in flags.FLAGS if f.type.startswith("config:")} | {"lora_modules"}

# Where the simulator still reads differently, and why.
_DIFFERENT = {
    # It knows a config's JSON must be an object, not which fields each config class has.
    ("/models/m", "--compilation-config.level", "3"): "fields of a config are not checked",
}
# Systemd loading a unit reads no file: `--config PATH` is read when the process starts
# (tests/simulator/test_vllm_cli.py), where vLLM's parser opens it whenever it parses.


def _plain(value: Any) -> Any:
    if isinstance(value, flags.ObjectDefault):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _defaults() -> dict[str, Any]:
    main, _serve = parsers()
    return {k: _plain(v) for k, v in vars(main.parse_args(["serve"])).items()}


def simulated(argv: list[str]) -> dict[str, Any]:
    """The simulator's reading of `vllm serve <argv>`, in the capture's terms."""
    try:
        processed, _config, _warnings = flexible(["serve", *argv], None, has_option)
        main, _serve = parsers()
        namespace = main.parse_args(processed)
    except UsageError as exc:
        return {"exit": 2, "message": _ADDRESS.sub("", f"{exc.prog}: error: {exc.message}\n")}
    except HelpExit:
        return {"exit": 0, "message": None}
    except CliCrash as exc:
        return {"raise": exc.failure.exception}
    defaults = _defaults()
    values = {k: _plain(v) for k, v in vars(namespace).items()}
    return {"ok": {k: v for k, v in values.items() if k not in defaults or defaults[k] != v}}


def _comparable(outcome: dict[str, Any]) -> dict[str, Any]:
    if "ok" not in outcome:
        return outcome
    return {"ok": {k: ("<set>" if k in _OBJECTS else v) for k, v in outcome["ok"].items()}}


def _known_different(argv: list[str]) -> bool:
    words = tuple(argv)
    return words in _DIFFERENT or ("--config" in words and words.index("--config") + 1 < len(words))


CASES = [case for case in DOCUMENT["cases"] if not _known_different(case["argv"])]


def test_the_capture_is_the_pinned_vllms() -> None:
    assert DOCUMENT["vllm_version"] == "0.32.0" == flags.VLLM_VERSION
    assert len(DOCUMENT["cases"]) > 500 and len(CASES) > 500


def test_the_known_differences_still_differ() -> None:
    """So that the list above shrinks when the simulator learns more."""
    left_out = [case for case in DOCUMENT["cases"] if _known_different(case["argv"])]
    assert {tuple(case["argv"]) for case in left_out} >= set(_DIFFERENT)
    for case in left_out:
        real = {k: v for k, v in case.items() if k != "argv"}
        assert _comparable(simulated(case["argv"])) != _comparable(real), case["argv"]


@pytest.mark.parametrize("case", CASES, ids=[" ".join(c["argv"])[:80] for c in CASES])
def test_the_simulator_reads_a_command_line_as_vllm_does(case: dict[str, Any]) -> None:
    real = {k: v for k, v in case.items() if k != "argv"}
    assert _comparable(simulated(case["argv"])) == _comparable(real)
