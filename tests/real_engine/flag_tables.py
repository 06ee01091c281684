"""The pinned vLLM's own `vllm serve` options, and how the project's flag tables compare.

``captures/vllm-0.32.0-flags.json`` is what ``dump_flags.py`` prints in the real-engine venv
(every option from vLLM's parser: strings, dest, type, choices, nargs, default, group, help).
test_flags.py holds the capture to the pinned parser; ``compare`` sets it beside the product's
table (deployments/engine_flags.py) and the simulator's (simulator/vllm_cli/flags.py).
``captures/vllm-0.32.0-serve-argv.json`` is what ``dump_serve_argv.py`` prints: how that parser
reads a set of command lines (tests/simulator/test_vllm_cli_parity.py holds the simulator to it).

    python tests/real_engine/flag_tables.py            # refresh both captures from the parser
    python tests/real_engine/flag_tables.py --report   # print the differences as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `tests.real_engine` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.real_engine import environment
from tests.real_engine.captures import CAPTURES

CAPTURE = CAPTURES / f"vllm-{environment.VLLM_VERSION}-flags.json"
DUMP = Path(__file__).with_name("dump_flags.py")
ARGV_CAPTURE = CAPTURES / f"vllm-{environment.VLLM_VERSION}-serve-argv.json"
ARGV_DUMP = Path(__file__).with_name("dump_serve_argv.py")


def dump_text(env: environment.RealEnv, script: Path = DUMP) -> str:
    """What the pinned parser prints (dump_flags.py, or another dump, in the real-engine
    venv)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    environ.update({"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"})
    done = subprocess.run(
        [str(env.python), str(script)],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script.name} exited {done.returncode}:\n{done.stderr[-4000:]}")
    return done.stdout


def load_capture(path: Path = CAPTURE) -> dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8")))


@dataclass(frozen=True)
class Differences:
    vllm_version: str
    vllm_options: int  # options (one per dest), positional model_tag excluded
    vllm_long_flags: int  # every long spelling, --no-x and second names included
    # Options of vLLM that the product's tables know under none of their spellings.
    unknown_to_product: list[str]
    # Flags in the product's tables that vLLM does not have (some are SGLang's, by design).
    product_not_in_vllm: list[str]
    # Second names of one option (e.g. --device-memory-utilization for --gpu-memory-utilization)
    # where the product knows one spelling but not the other.
    product_knows_one_name_only: list[list[str]]
    # Spellings the simulator accepts that vLLM no longer has, and vLLM's it lacks (--no-x
    # forms aside).
    simulator_not_in_vllm: list[str]
    simulator_missing: list[str]

    def counts(self) -> dict[str, int]:
        return {key: len(value) for key, value in asdict(self).items() if isinstance(value, list)}


def _long(names: Iterable[str]) -> list[str]:
    return [name for name in names if name.startswith("--")]


def compare(
    capture: dict[str, Any], product_known: Iterable[str], simulator_flags: Iterable[str]
) -> Differences:
    """Pure: the capture's options against two sets of flag spellings."""
    product = set(product_known)
    simulator = set(simulator_flags)
    options = [o for o in capture["options"] if _long(o["option_strings"])]
    real = {name for o in options for name in _long(o["option_strings"])}

    def known(option: dict[str, Any]) -> bool:
        names = _long(option["option_strings"])
        return any(name in product for name in names)

    one_name_only = []
    for option in options:
        # BooleanOptionalAction's --no-x is the same switch, not a second name.
        names = [n for n in _long(option["option_strings"]) if not _is_negation(n, option)]
        if len(names) > 1 and 0 < sum(name in product for name in names) < len(names):
            one_name_only.append(names)
    return Differences(
        vllm_version=str(capture["vllm_version"]),
        vllm_options=len(options),
        vllm_long_flags=len(real),
        unknown_to_product=sorted(_long(o["option_strings"])[0] for o in options if not known(o)),
        product_not_in_vllm=sorted(name for name in product if name not in real),
        product_knows_one_name_only=sorted(one_name_only),
        simulator_not_in_vllm=sorted(name for name in simulator if name not in real),
        # --no-x of a BooleanOptionalAction is left out: both tables derive it from --x.
        simulator_missing=sorted(
            name
            for o in options
            for name in _long(o["option_strings"])
            if name not in simulator and not _is_negation(name, o)
        ),
    )


def _is_negation(name: str, option: dict[str, Any]) -> bool:
    return option["action"] == "BooleanOptionalAction" and name.startswith("--no-")


def project_tables() -> tuple[list[str], list[str]]:
    """The product's known flags and the simulator's long flags, imported from the project.
    engine_flags imports Django's ValidationError only, so no settings are needed."""
    from deployments.unit_files import engine_flags
    from simulator.vllm_cli import flags

    return list(engine_flags.KNOWN), list(flags.LONG_FLAGS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", action="store_true", help="print the differences")
    args = parser.parse_args(argv)
    if args.report:
        product, simulator = project_tables()
        differences = compare(load_capture(), product, simulator)
        print(json.dumps({"counts": differences.counts(), **asdict(differences)}, indent=1))
        return 0
    env = environment.ensure()
    text = dump_text(env)
    CAPTURE.parent.mkdir(exist_ok=True)
    CAPTURE.write_text(text, encoding="utf-8")
    print(f"wrote {CAPTURE} ({json.loads(text)['count']} options)")
    text = dump_text(env, ARGV_DUMP)  # reads the flags capture for its random words
    ARGV_CAPTURE.write_text(text, encoding="utf-8")
    print(f"wrote {ARGV_CAPTURE} ({len(json.loads(text)['cases'])} command lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
