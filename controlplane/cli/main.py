"""The `cpctl` console script: the command groups, and how any outcome becomes an exit code.

Click (Pallets) rather than Typer: it is already a pinned dependency of the product (Celery and
import-linter use it), it has shell completion for bash, zsh and fish built in, and Typer would
add itself, rich and shellingham on top of Click for type-hint declarations this small client
does not need.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence

import click
from click.shell_completion import get_completion_class

from . import audit, changes, config, hosts, rollouts, tokens
from .context import fresh_state
from .exits import CliError, ExitCode

# Options cpctl will never have: a secret on the command line shows in `ps` and in the shell's
# history. Said in words, rather than Click's "no such option".
SECRET_OPTIONS = ("--token", "--url", "--password")
COMPLETION_VAR = "_CPCTL_COMPLETE"


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="The server and token come from CPCTL_URL and CPCTL_TOKEN, or from "
    "~/.config/cpctl/config.toml (mode 0600); never from the command line. Exit codes: "
    "0 ok, 1 error, 2 usage, 3 auth, 4 not found, 5 refused, 6 stale snapshot, 7 drift, "
    "8 failed, 9 unfinished, 10 unreachable.",
)
@click.version_option(package_name="gpu-controlplane", prog_name="cpctl")
def cli() -> None:
    """Command-line client of the GPU control plane's API: hosts, snapshots, changes (request,
    approve, watch), rollouts, the audit log and your API tokens, under the same rules as the
    pages."""


@cli.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script, e.g. eval "$(cpctl completion bash)"."""
    cls = get_completion_class(shell)
    assert cls is not None  # the choice lists only the shells Click completes
    click.echo(cls(cli, {}, "cpctl", COMPLETION_VAR).source())


@cli.command("config")
def show_config() -> None:
    """Which server cpctl talks to and where the token comes from (never the token)."""
    found = config.load()
    click.echo(f"server  {found.url} (from {found.url_from})")
    # A token is `<prefix>_<secret>`, the prefix (cpt_ and 8 hex digits) being what the token
    # pages list; anything else is shown as set, not in part.
    prefix = found.token[:12] if re.fullmatch(r"cpt_[0-9a-f]{8}_.+", found.token) else "set"
    click.echo(f"token   {prefix}… (from {found.token_from})")


cli.add_command(hosts.hosts)
cli.add_command(hosts.snapshots)
cli.add_command(changes.changes)
cli.add_command(audit.audit)
cli.add_command(tokens.tokens)
cli.add_command(rollouts.rollouts)


def secret_on_command_line(args: Sequence[str]) -> str | None:
    for arg in args:
        if arg == "--":
            return None
        name = arg.split("=", 1)[0]
        if name in SECRET_OPTIONS:
            return name
    return None


def run(args: Sequence[str]) -> int:
    """Run cpctl with `args`; the exit code."""
    if option := secret_on_command_line(args):
        click.echo(
            f"cpctl: there is no {option} option: a server address or token on the command "
            "line would show in `ps` and in the shell's history. Set CPCTL_URL and "
            f"CPCTL_TOKEN, or url and token in {config.config_path(os.environ)} (mode 0600).",
            err=True,
        )
        return ExitCode.USAGE
    current = fresh_state()
    try:
        result = cli.main(args=list(args), prog_name="cpctl", standalone_mode=False)
    except CliError as exc:
        if current.json and exc.body is not None:
            click.echo(json.dumps(exc.body, indent=2, ensure_ascii=False))
        click.echo(f"cpctl: {exc.message}", err=True)
        return exc.code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        click.echo("cpctl: interrupted", err=True)
        return 130
    return int(result) if isinstance(result, int) else ExitCode.OK


def main() -> None:
    try:
        code = run(sys.argv[1:])
        sys.stdout.flush()
    except BrokenPipeError:
        # `cpctl audit export | head`: the reader left; what it did not read is not an error.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = ExitCode.OK
    sys.exit(code)
