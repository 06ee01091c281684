"""`{% gpu_chart_windows request.GET.window host as charts %}`: the GPU charts' window links,
opening on the window the host's samples fill when the address names none.

A tag rather than view context so that any page including templates/hosts/partials/
gpu_charts.html gets working 1 h / 24 h / 7 d links without its view knowing about charts.
"""

from __future__ import annotations

from typing import Any

from django import template

from hosts import charts
from hosts.models import Host

register = template.Library()


@register.simple_tag
def gpu_chart_windows(requested: str | None, host: Host | None = None) -> dict[str, Any]:
    return charts.window_choices(requested, host)
