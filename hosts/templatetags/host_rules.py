"""The host rules templates ask about, answered by the same functions the views enforce."""

from __future__ import annotations

from typing import Any

from django import template

from hosts import services

register = template.Library()


@register.filter
def may_probe(user: Any) -> bool:
    return services.user_may_probe(user)


@register.filter
def may_accept_host_keys(user: Any) -> bool:
    return services.user_may_accept_host_keys(user)
