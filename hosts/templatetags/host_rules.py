"""The host rules templates ask about, answered by the same functions the views enforce:
`user|may_probe:host` on one host (the page offers the button there only), `user|may_probe`
anywhere."""

from __future__ import annotations

from typing import Any

from django import template

from hosts import services
from hosts.models import Host

register = template.Library()


@register.filter
def may_probe(user: Any, host: Host | None = None) -> bool:
    return services.user_may_probe(user, host)


@register.filter
def may_accept_host_keys(user: Any) -> bool:
    return services.user_may_accept_host_keys(user)
