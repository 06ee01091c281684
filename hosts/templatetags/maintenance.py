"""The host page's maintenance card, rendered with the context the maintenance views answer."""

from __future__ import annotations

from typing import Any

from django import template

from hosts.models import Host
from hosts.views_maintenance import CARD, maintenance_card

register = template.Library()


@register.inclusion_tag(CARD, takes_context=True)
def maintenance_banner(context: template.Context, host: Host) -> dict[str, Any]:
    card = maintenance_card(context["user"], host)
    card["csrf_token"] = context.get("csrf_token")
    return card
