"""`{% row_url "hosts:detail" host.name %}`: `{% url %}` for the links of long lists' rows.

reverse() checks every URL it builds against its pattern; the fleet page's 50 rows of up to four
links each spent a quarter of their rendering time there. This tag reverses each view once (per
URL configuration and script prefix) with a stand-in argument and puts each row's argument in
its place, which gives the same text whenever reverse() would not escape the argument: letters,
digits and `._~-` (quote() leaves them as they are), and not `.` or `..` alone (reverse()
escapes those path segments). Any other argument goes through reverse() itself. For views
whose one argument is `<str:...>` or `<int:...>` (a `<slug:...>` would accept the stand-in
but refuse a name with a dot, which this would not notice).
"""

from __future__ import annotations

import re
from typing import Any

from django import template
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse

register = template.Library()

_AS_IS = re.compile(r"[A-Za-z0-9._~-]+")
# One stand-in per kind of argument, so that an <int:...> pattern refuses a name as reverse()
# would: a view whose pattern refuses its stand-in is reversed every time (None below).
_STAND_INS = {int: "90817263544536271809", str: "rowurl-stand-in"}
_SPLIT: dict[tuple[str, type, Any, str], tuple[str, str] | None] = {}


@register.simple_tag
def row_url(viewname: str, arg: Any) -> str:
    kind: type
    if isinstance(arg, int) and not isinstance(arg, bool):
        kind, text = int, str(arg)
    elif isinstance(arg, str) and _AS_IS.fullmatch(arg) and arg.strip("."):
        kind, text = str, arg
    else:
        return reverse(viewname, args=[arg])
    key = (viewname, kind, get_urlconf(), get_script_prefix())
    if key not in _SPLIT:
        stand_in = _STAND_INS[kind]
        try:
            head, _, tail = reverse(viewname, args=[stand_in]).partition(stand_in)
            _SPLIT[key] = (head, tail)
        except NoReverseMatch:
            _SPLIT[key] = None
    split = _SPLIT[key]
    if split is None:
        return reverse(viewname, args=[arg])
    return split[0] + text + split[1]


@receiver(setting_changed)
def _forget(*, setting: str, **kwargs: Any) -> None:
    if setting in {"ROOT_URLCONF", "FORCE_SCRIPT_NAME"}:
        _SPLIT.clear()
