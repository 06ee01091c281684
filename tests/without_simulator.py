"""A Python environment without the simulator, as the production image and the product's wheel
have: the source tree is still there (manage.py puts it on sys.path), so a `sitecustomize` on
PYTHONPATH puts a finder first on `sys.meta_path` that refuses `simulator` and its submodules
as an absent package is refused (ModuleNotFoundError naming it). The finder writes each name it
refused to a file, so a test tells "never imported" from "imported, failed, and swallowed"."""

from __future__ import annotations

import os
from pathlib import Path

SITECUSTOMIZE = """\
import sys


class _NoSimulator:
    def find_spec(self, name, path=None, target=None):
        if name == "simulator" or name.startswith("simulator."):
            with open({log!r}, "a") as log:
                log.write(name + "\\n")
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NoSimulator())
"""


class WithoutSimulator:
    """`env` runs Python without the simulator; `attempts()` lists what tried to import it."""

    def __init__(self, tmp_path: Path, env: dict[str, str] | None = None) -> None:
        site = tmp_path / "no-simulator"
        site.mkdir(parents=True, exist_ok=True)
        self.log = site / "attempts.log"
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(log=str(self.log)))
        self.env = dict(os.environ if env is None else env)
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(site), self.env.get("PYTHONPATH", "")) if p
        )

    def attempts(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []
