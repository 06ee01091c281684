"""Where cpctl finds the server and the token: the environment, or a config file only its
owner can read. Never the command line, where `ps` and the shell's history would show them.

    CPCTL_URL, CPCTL_TOKEN      win over the file, each on its own
    CPCTL_CONFIG                the file's path (default $XDG_CONFIG_HOME/cpctl/config.toml,
                                else ~/.config/cpctl/config.toml)
    CPCTL_ALLOW_HTTP=1          send the token over plain http to an address that is not this
                                machine (refused otherwise: anyone on the path could read it)

The file is TOML: `url = "https://cp.example.com"` and `token = "cpt_..."`; it is refused if
its group or others have any permission on it, or if someone else owns it (as ssh refuses a
private key).
"""

from __future__ import annotations

import ipaddress
import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .exits import CliError, ExitCode

KEYS = ("url", "token")
API_PREFIX = "/api/v1"


@dataclass(frozen=True)
class Config:
    url: str  # the server's origin and path prefix, without /api/v1 and without a final /
    token: str
    url_from: str  # "CPCTL_URL" or the file's path: where each came from, for `cpctl config`
    token_from: str

    @property
    def api(self) -> str:
        return f"{self.url}{API_PREFIX}/"


def config_path(env: Mapping[str, str]) -> Path:
    if env.get("CPCTL_CONFIG"):
        return Path(env["CPCTL_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "cpctl" / "config.toml"


def read_file(path: Path) -> dict[str, str]:
    """The file's keys, after checking who may read it. The check is made on the open file
    (fstat), so the file cannot be swapped between the check and the read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CliError(
            f"cannot read the config file {path}: {exc.strerror}", ExitCode.USAGE
        ) from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if info.st_uid != os.getuid():
            raise CliError(
                f"the config file {path} belongs to another user; refusing to read a token from it",
                ExitCode.USAGE,
            )
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CliError(
                f"the config file {path} holds a token but its mode is "
                f"{stat.S_IMODE(info.st_mode):04o}: others may read or change it. "
                f"Run: chmod 600 {path}",
                ExitCode.USAGE,
            )
        try:
            data = tomllib.load(handle)
        except tomllib.TOMLDecodeError as exc:
            raise CliError(f"the config file {path} is not TOML: {exc}", ExitCode.USAGE) from exc
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise CliError(
            f"the config file {path} has unknown keys {', '.join(unknown)} "
            f"(known: {', '.join(KEYS)})",
            ExitCode.USAGE,
        )
    for key, value in data.items():
        if not isinstance(value, str):
            raise CliError(f"{key} in {path} must be a string", ExitCode.USAGE)
    return data


def load(env: Mapping[str, str] | None = None) -> Config:
    env = os.environ if env is None else env
    path = config_path(env)
    url, token = env.get("CPCTL_URL", "").strip(), env.get("CPCTL_TOKEN", "").strip()
    url_from, token_from = "CPCTL_URL", "CPCTL_TOKEN"
    if not (url and token):
        # The file is opened only when the environment does not say everything.
        found = read_file(path)
        if not url and found.get("url"):
            url, url_from = found["url"].strip(), str(path)
        if not token and found.get("token"):
            token, token_from = found["token"].strip(), str(path)
    if not url or not token:
        missing = " and ".join(n for n, v in (("CPCTL_URL", url), ("CPCTL_TOKEN", token)) if not v)
        raise CliError(
            f"no server to talk to: set {missing} in the environment, or url and token in "
            f"{path} (mode 0600). A token comes from the API tokens page or `cpctl tokens "
            "create`.",
            ExitCode.USAGE,
        )
    check_token(token, token_from)
    return Config(
        url=normalise_url(url, allow_http=env.get("CPCTL_ALLOW_HTTP") == "1"),
        token=token,
        url_from=url_from,
        token_from=token_from,
    )


def check_token(token: str, where: str) -> None:
    # A header with a space or a newline would be refused by the HTTP library with the header,
    # token included, in its message: say it here, without the token.
    if not all("!" <= ch <= "~" for ch in token):
        raise CliError(
            f"the token from {where} has spaces or characters a token never has", ExitCode.USAGE
        )


def normalise_url(url: str, *, allow_http: bool) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(
            f"the server URL {url!r} is not an http(s) address, e.g. https://cp.example.com",
            ExitCode.USAGE,
        )
    if parts.username or parts.password:
        raise CliError(
            "the server URL carries a user name or password: give the URL alone, and the "
            "token in CPCTL_TOKEN or the config file",
            ExitCode.USAGE,
        )
    if parts.scheme == "http" and not allow_http and not is_loopback(parts.hostname):
        raise CliError(
            f"refusing to send the token over plain http to {parts.hostname}: use https, or "
            "set CPCTL_ALLOW_HTTP=1 if this network is trusted",
            ExitCode.USAGE,
        )
    path = parts.path.rstrip("/")
    if path.endswith(API_PREFIX):
        path = path[: -len(API_PREFIX)]
    return f"{parts.scheme}://{parts.netloc}{path}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
