"""Numbers the way `systemctl status` and `nvidia-smi` print them."""

from __future__ import annotations

import datetime as dt

from django import template
from django.utils import timezone

from hosts.parsers.systemd import parse_systemd_timestamp

register = template.Library()


@register.filter
def bytes_human(value: int | None) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "K", "M", "G", "T"):
        if size < 1024 or unit == "T":
            return f"{size:.1f}{unit}" if unit != "B" else f"{int(size)}B"
        size /= 1024
    return f"{size:.1f}T"  # pragma: no cover


@register.filter
def nsec_human(value: int | None) -> str:
    """CPU time as systemctl status prints it: 1h 2min 3.456s."""
    if value is None:
        return "-"
    seconds = value / 1e9
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{int(hours)}h"] if hours else []
    parts += [f"{int(minutes)}min"] if minutes else []
    parts.append(f"{seconds:.3f}s")
    return " ".join(parts)


@register.filter
def uptime(value: str | None, clock_skew: int | None = None) -> str:
    """`3h 12min ago` from a systemd timestamp. The timestamp is on the host's clock, so it is
    measured against the host's time (the control plane's, shifted by the skew the probe saw)."""
    since = parse_systemd_timestamp(value)
    if since is None:
        return ""
    shift = clock_skew if isinstance(clock_skew, int) else 0
    now = timezone.now() + dt.timedelta(seconds=shift)
    seconds = max(0, int((now - since).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h ago"
    if hours:
        return f"{hours}h {minutes}min ago"
    return f"{minutes}min {seconds}s ago" if minutes else f"{seconds}s ago"


@register.filter
def skew_human(seconds: object) -> str:
    """`5h 0min ahead` for a host clock off by more than a minute; empty otherwise."""
    if not isinstance(seconds, int) or abs(seconds) < 60:
        return ""
    hours, minutes = divmod(round(abs(seconds) / 60), 60)  # a probe takes a moment: round
    span = f"{hours}h {minutes}min" if hours else f"{minutes}min"
    return f"{span} {'ahead of' if seconds > 0 else 'behind'}"
