"""`<engine python> -m pip`: enough pip to reinstall the engine's package over itself.

`pip install --force-reinstall --no-deps vllm==<version>` (as root: the venv is root's)
downloads the wheel, uninstalls the package and installs it again, printing what pip prints
and taking what a ~400 MB download and an install take (host seconds, scaled like the host's
clock). It restores the package's files (`simulator.engine_files.reinstall`); a running engine
keeps the code it loaded until it restarts. It fails as pip fails when the version is not on
the index, when the index cannot be reached (the `pip_index_unreachable` fault), or when it may
not write the venv (not root). Without --force-reinstall an installed version is "already
satisfied" and nothing changes. `--no-index --find-links DIR` installs from a wheel directory
instead of the index: every host has the installed version's wheel in `catalog.WHEEL_DIR`; any
other directory is ignored as pip ignores a path that does not exist, and nothing is found.
The simulated index knows vLLM only, and only the installed version can be installed (a host
runs one version here); other known versions are refused with a message saying so. Without
--no-deps, vLLM's pinned dependencies are reinstalled too.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from dataclasses import dataclass, field

from .. import catalog, engine_files
from .interface import Context, Result

PIP_VERSION = "25.2"
SITE_PACKAGES = "/opt/vllm/.venv/lib/python3.12/site-packages"
INDEX_VERSIONS = ("0.10.0", "0.10.1", "0.10.1.1", "0.10.2", "0.11.0", "0.11.1", "0.11.2")
# vLLM's own pinned dependencies a reinstall without --no-deps fetches again: name, version, MB.
DEPENDENCIES = (
    ("torch", "2.9.0", 899.7),
    ("xformers", "0.0.33", 117.2),
    ("triton", "3.5.0", 162.4),
)
WHEEL_MB = 409.6
DOWNLOAD_MB_PER_S = 110.0
RESOLVE_SECONDS = 0.8
INSTALL_SECONDS_PER_100_MB = 0.6
RETRY_SLEEPS = (0.0, 0.5, 1.0, 2.0, 4.0)  # urllib3's backoff over pip's five retries
_FLAGS = {
    "--force-reinstall",
    "--no-deps",
    "-q",
    "--quiet",
    "--no-cache-dir",
    "--disable-pip-version-check",
    "--no-input",
    "-U",
    "--upgrade",
    "--no-warn-script-location",
    "--no-index",
}
_VALUED = {
    "-i",
    "--index-url",
    "--extra-index-url",
    "--progress-bar",
    "--root-user-action",
    "-f",
    "--find-links",
}
_REQUIREMENT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:==([A-Za-z0-9.+!-]+))?")


@dataclass
class _Install:
    flags: set[str] = field(default_factory=set)
    values: dict[str, str] = field(default_factory=dict)
    requirements: list[str] = field(default_factory=list)


def pip(
    ctx: Context, interpreter: str, args: list[str], *, engine: bool
) -> Result | Awaitable[Result]:
    """pip's entry: --version, install, or what pip says to anything else."""
    if not engine:
        return Result().err(f"{interpreter}: No module named pip\n").exit(1)
    if not args or args[0] in ("-h", "--help", "help"):
        return Result().out(f"\nUsage:   \n  {interpreter} -m pip <command> [options]\n\n")
    if args[0] in ("-V", "--version"):
        return Result().out(f"pip {PIP_VERSION} from {SITE_PACKAGES}/pip (python 3.12)\n")
    if args[0] != "install":
        return (
            Result()
            .err(f"simulated pip: only `install` and `--version` are simulated, not {args[0]!r}\n")
            .exit(1)
        )
    parsed = _parse(args[1:])
    if isinstance(parsed, str):
        return (
            Result()
            .err(
                f"\nUsage:   \n  {interpreter} -m pip install [options] <requirement specifier> "
                f"[package-index-options] ...\n\n{parsed}\n"
            )
            .exit(2)
        )
    if not parsed.requirements:
        missing = (
            'ERROR: You must give at least one requirement to install (see "pip help install")'
        )
        return Result().err(missing + "\n").exit(1)
    return _Installer(ctx, parsed).run()


def _parse(args: list[str]) -> _Install | str:
    """The install's options and requirements, or pip's complaint."""
    parsed = _Install()
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=")
        if arg in _FLAGS:
            parsed.flags.add({"-q": "--quiet", "-U": "--upgrade"}.get(arg, arg))
        elif name in _VALUED:
            if not eq:
                if i + 1 >= len(args):
                    return f"{name} option requires 1 argument"
                i += 1
                inline = args[i]
            parsed.values[name] = inline
        elif arg.startswith("-"):
            return f"no such option: {name}"
        else:
            parsed.requirements.append(arg)
        i += 1
    return parsed


class _Installer:
    """The install itself, awaited by the shell: it takes time."""

    def __init__(self, ctx: Context, parsed: _Install) -> None:
        self.ctx = ctx
        self.parsed = parsed
        self.result = Result()

    async def _sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds * self.ctx.machine.time_scale)

    def _say(self, text: str) -> None:
        if "--quiet" not in self.parsed.flags:
            self.result.out(text)

    @property
    def links(self) -> str | None:
        return self.parsed.values.get("--find-links", self.parsed.values.get("-f"))

    @property
    def offline(self) -> bool:
        return "--no-index" in self.parsed.flags

    async def run(self) -> Result:
        machine, result = self.ctx.machine, self.result
        if self.offline:
            if not self._wheel_directory():
                return result.exit(1)
        elif "pip_index_unreachable" in machine.faults:
            return await self._unreachable()
        await self._sleep(RESOLVE_SECONDS)
        wanted = []
        for requirement in self.parsed.requirements:
            found = self._resolve(requirement)
            if found is None:
                return result.exit(1)
            wanted.append(found)
        force = "--force-reinstall" in self.parsed.flags
        if not force:
            for requirement, version in wanted:
                self._say(
                    f"Requirement already satisfied: {requirement} in {SITE_PACKAGES} ({version})\n"
                )
            return result
        return await self._reinstall()

    def _wheel_directory(self) -> bool:
        """With --no-index: a --find-links directory holding the wheel, or pip's errors."""
        links = self.links
        if links is not None:
            self._say(f"Looking in links: {links}\n")
        if links is not None and links.rstrip("/") == catalog.WHEEL_DIR:
            return True
        if links is not None:
            self.result.err(
                f"WARNING: Location '{links}' is ignored: it is either a non-existing path or "
                "lacks a specific scheme.\n"
            )
        for requirement in self.parsed.requirements:
            self.result.err(
                f"ERROR: Could not find a version that satisfies the requirement {requirement} "
                f"(from versions: none)\nERROR: No matching distribution found for {requirement}\n"
            )
        return False

    def _resolve(self, requirement: str) -> tuple[str, str] | None:
        """(requirement, version) of vLLM on the index; None after printing pip's error."""
        match = _REQUIREMENT.fullmatch(requirement)
        name = match.group(1).lower().replace("_", "-") if match else ""
        version = match.group(2) if match else None
        versions = ", ".join(INDEX_VERSIONS) if name == "vllm" else "none"
        if name != "vllm" or (version is not None and version not in INDEX_VERSIONS):
            self.result.err(
                f"ERROR: Could not find a version that satisfies the requirement {requirement} "
                f"(from versions: {versions})\n"
                f"ERROR: No matching distribution found for {requirement}\n"
            )
            return None
        if version is not None and version != catalog.VLLM_VERSION:
            self.result.err(
                f"simulated pip: vllm {version} is on the index, but this simulated host can "
                f"only reinstall the version it runs ({catalog.VLLM_VERSION})\n"
            )
            return None
        return requirement, catalog.VLLM_VERSION

    async def _unreachable(self) -> Result:
        """pip's five retries against an index it cannot reach, then its error."""
        for left, pause in zip(range(4, -1, -1), RETRY_SLEEPS, strict=True):
            await self._sleep(pause)
            self.result.err(
                f"WARNING: Retrying (Retry(total={left}, connect=None, read=None, redirect=None, "
                "status=None)) after connection broken by 'NewConnectionError('<pip._vendor."
                "urllib3.connection.HTTPSConnection object at 0x7f3a9c2b1d90>: Failed to "
                "establish a new connection: [Errno 101] Network is unreachable')': /simple/"
                f"{self.parsed.requirements[0].split('=')[0]}/\n"
            )
        requirement = self.parsed.requirements[0]
        return self.result.err(
            f"ERROR: Could not find a version that satisfies the requirement {requirement} "
            "(from versions: none)\n"
            f"ERROR: No matching distribution found for {requirement}\n"
        ).exit(1)

    async def _reinstall(self) -> Result:
        ctx, result = self.ctx, self.result
        version = catalog.VLLM_VERSION
        packages = [("vllm", version, WHEEL_MB)]
        if "--no-deps" not in self.parsed.flags:
            packages += list(DEPENDENCIES)
        for name, pinned, size in packages:
            wheel = f"{name}-{pinned}-cp38-abi3-manylinux1_x86_64.whl"
            if self.offline:
                self._say(f"Processing {catalog.WHEEL_DIR}/{wheel}\n")
                continue
            self._say(f"Collecting {name}=={pinned}\n  Downloading {wheel}.metadata (17 kB)\n")
            self._say(f"Downloading {wheel} ({size:.1f} MB)\n")
            await self._sleep(size / DOWNLOAD_MB_PER_S)
        names = ", ".join(n for n, _, _ in packages)
        self._say(f"Installing collected packages: {names}\n")
        first, first_version, _ = packages[0]
        self._say(
            f"  Attempting uninstall: {first}\n    Found existing installation: {first} "
            f"{first_version}\n    Uninstalling {first}-{first_version}:\n"
        )
        if not ctx.as_root:
            return result.err(
                "ERROR: Could not install packages due to an OSError: [Errno 13] Permission "
                "denied: '/opt/vllm/.venv/bin/vllm'\nCheck the permissions.\n\n"
            ).exit(1)
        await self._sleep(sum(size for _, _, size in packages) / 100 * INSTALL_SECONDS_PER_100_MB)
        engine_files.reinstall(ctx.machine)
        self._say(f"      Successfully uninstalled {first}-{first_version}\n")
        installed = " ".join(f"{n}-{v}" for n, v, _ in packages)
        self._say(f"Successfully installed {installed}\n")
        if self.parsed.values.get("--root-user-action") != "ignore":
            result.err(
                "WARNING: Running pip as the 'root' user can result in broken permissions and "
                "conflicting behaviour with the system package manager, possibly rendering your "
                "system unusable. It is recommended to use a virtual environment instead: "
                "https://pip.pypa.io/warnings/venv. Use the --root-user-action option if you "
                "know what you are doing and want to suppress this warning.\n"
            )
        return result
