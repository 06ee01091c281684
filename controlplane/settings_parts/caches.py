"""Django's caches: the default, and the rendered fragments of the pages people keep open."""

from __future__ import annotations

from typing import Any


def caches_config(fragment_entries: int) -> dict[str, dict[str, Any]]:
    """CACHES. `fragments` holds each fleet row, a host's snapshot history and audit timeline
    under a digest of the facts it shows, so an entry never goes stale: it is only not asked
    for again. In each process's memory: a page's fragments come back with no network round
    trip, and no shared store has to be kept apart per database; each worker renders a fragment
    once. At about 4 KB a row, 10,000 entries are about 40 MB a process at most."""
    return {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "fragments": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "fragments",
            "TIMEOUT": 3600,
            "OPTIONS": {"MAX_ENTRIES": fragment_entries},
        },
    }
