"""Settings values that would start a control plane that cannot keep its rules: refused at start
with ImproperlyConfigured, naming the setting, before anything runs on them."""

from __future__ import annotations

import ipaddress
from typing import Any

from django.core.exceptions import ImproperlyConfigured

# What the demo makes up when unset (a key derived from another, localhost); a production
# install sets each of them itself.
PRODUCTION_REQUIRED = ("SECRET_KEY", "FIELD_ENCRYPTION_KEY", "AUDIT_SIGNING_KEY", "ALLOWED_HOSTS")


def refuse_demo_defaults(env: Any, *, debug: bool) -> None:
    """PRODUCTION=true refuses to start on the demo's defaults, or with DEBUG on. `env` is the
    settings' `environ.Env`: set but blank counts as unset."""
    missing = [name for name in PRODUCTION_REQUIRED if not env.str(name, default="").strip()]
    if missing:
        raise ImproperlyConfigured(
            f"PRODUCTION is set, so these must be too: {', '.join(missing)} (see .env.example)"
        )
    if debug:
        raise ImproperlyConfigured("PRODUCTION is set: DEBUG must be off")


def require_lease_outlasts_commands(
    lease: int, *, job_command: float, ssh_command: float, margin: int
) -> None:
    """A job's lease must outlast its longest command by `margin`: otherwise a heartbeat stalled
    behind a command could let a second job onto the host while the first one's still runs."""
    longest = max(job_command, ssh_command)
    if longest + margin > lease:
        raise ImproperlyConfigured(
            f"JOB_LEASE_SECONDS={lease} is too short: it must be at least the longest "
            f"command timeout ({longest:g} s, from JOB_COMMAND_TIMEOUT_SECONDS and "
            f"SSH_COMMAND_TIMEOUT) plus {margin} s"
        )


def allowed_networks(values: list[str]) -> list[str]:
    """WEBHOOK_ALLOWED_NETWORKS without blanks, each one a network (CIDR) or refused: a typo
    would otherwise surface only when a delivery is refused."""
    networks = [value.strip() for value in values if value.strip()]
    for network in networks:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError as exc:
            raise ImproperlyConfigured(f"WEBHOOK_ALLOWED_NETWORKS: {exc}") from None
    return networks
