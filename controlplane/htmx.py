"""The one test every view uses to tell an htmx fragment request from a page load."""

from __future__ import annotations

from django.http import HttpRequest


def is_partial(request: HttpRequest) -> bool:
    """An htmx request that wants a fragment (a boosted link still wants the whole page)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx and not htmx.boosted)
