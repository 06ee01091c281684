"""The fleet page's rows, each rendered once per change of what it shows.

A row's facts (verdict, service, GPU bars, engine check, snapshot) stay the same until the
host's next snapshot, verdict or maintenance change, yet the page re-rendered all of them for
every request: about 100 template nodes a row, most of a fleet page's time at 50 rows. So a
row is rendered from `hosts/partials/fleet_row.html` with no request, no user and no CSRF token
in its context, and kept in the `fragments` cache under `hosts.selectors.fleet_row_key` (a
digest of everything the template reads). What changes between requests is left in it as
holes, filled on each request:

- `{% hole "name" arg %}`: the clocks (an age, fresh or stale, the next probe, from a time
  in `arg`), the attributes of a row polling for its own probe, and the person's CSRF token;
- `{% holeblock "probe" %}...{% endholeblock %}`: the probe button, kept only where the
  person's role holds on the host (a probing row shows that instead).

A hole's mark carries a tag derived from SECRET_KEY, so text a host reports (a model name, a
reason) cannot pass for one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django import template
from django.conf import settings
from django.core.cache import caches
from django.template import Context
from django.template.defaulttags import CsrfTokenNode
from django.template.loader import get_template
from django.utils.crypto import salted_hmac
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from hosts import selectors, services
from hosts.selectors import FleetRow

from .row_urls import row_url

register = template.Library()

ROW_TEMPLATE = "hosts/partials/fleet_row.html"
CACHE = "fragments"
_NAME = re.compile("[a-z_]+")


_TAGS: dict[str, str] = {}  # by SECRET_KEY, which tests may change


def _tag() -> str:
    key = settings.SECRET_KEY
    if key not in _TAGS:
        _TAGS[key] = salted_hmac("hosts.fleet_rows.hole", "holes").hexdigest()[:16]
    return _TAGS[key]


_PATTERNS: dict[str, re.Pattern[str]] = {}  # by tag


def _holes() -> re.Pattern[str]:
    """A hole (\\x1e...\\x1e) or a block hole (\\x1d...\\x1d, its content, its end)."""
    tag = _tag()
    if tag not in _PATTERNS:
        _PATTERNS[tag] = re.compile(
            f"\x1e{tag}:(?P<name>[a-z_]+):(?P<arg>[0-9.-]*)\x1e"
            f"|\x1d{tag}:(?P<block>[a-z_]+)\x1d(?P<body>.*?)\x1d{tag}:/(?P=block)\x1d",
            re.DOTALL,
        )
    return _PATTERNS[tag]


@register.simple_tag
def hole(name: str, arg: Any = "") -> SafeString:
    """A mark filled on each request (see `_fillers`). `arg` is a time (kept as seconds since
    the epoch) or a number."""
    if not _NAME.fullmatch(name):
        raise template.TemplateSyntaxError(f"a hole's name is lowercase words: {name!r}")
    if hasattr(arg, "timestamp"):
        arg = f"{arg.timestamp():.6f}"
    elif arg is None or arg == "":
        arg = ""
    else:
        arg = str(float(arg)) if isinstance(arg, float) else str(int(arg))
    return mark_safe(f"\x1e{_tag()}:{name}:{arg}\x1e")  # noqa: S308 (a name and a number)


class HoleBlockNode(template.Node):
    def __init__(self, name: str, nodelist: template.NodeList) -> None:
        self.name, self.nodelist = name, nodelist

    def render(self, context: template.Context) -> str:
        tag = _tag()
        body = self.nodelist.render(context)
        return f"\x1d{tag}:{self.name}\x1d{body}\x1d{tag}:/{self.name}\x1d"


@register.tag
def holeblock(parser: template.base.Parser, token: template.base.Token) -> HoleBlockNode:
    """`{% holeblock "name" %}...{% endholeblock %}`: content a filler keeps or replaces."""
    bits = token.split_contents()
    name = bits[1].strip("\"'") if len(bits) == 2 else ""
    if not _NAME.fullmatch(name):
        raise template.TemplateSyntaxError("holeblock takes one name in lowercase words")
    nodelist = parser.parse(("endholeblock",))
    parser.delete_first_token()
    return HoleBlockNode(name, nodelist)


def _seconds(value: float) -> str:
    """Whole seconds, rounded as `|floatformat:0` rounds (half up, from the float's repr)."""
    return str(int(Decimal(repr(value)).quantize(_ONE, rounding=ROUND_HALF_UP)))


_ONE = Decimal(1)


def _age(now: float, taken: str) -> float:
    return max(0.0, now - float(taken))  # as StateSnapshot.age_seconds


class Request:
    """What fills the holes for one request: its person and token (and each row's clock: the
    time its facts were read)."""

    def __init__(self, context: template.Context) -> None:
        self.max_age = settings.SNAPSHOT_MAX_AGE_SECONDS
        self.user = context.get("user")
        self._context = context
        self._csrf: str | None = None

    def csrf(self, _arg: str = "") -> str:
        """The hidden input `{% csrf_token %}` renders, for this request's session."""
        if self._csrf is None:
            token = self._context.get("csrf_token")
            self._csrf = str(CsrfTokenNode().render(Context({"csrf_token": token})))
        return self._csrf

    def fillers(self, row: FleetRow, *, probing: bool) -> dict[str, Callable[[str], str]]:
        now, host = row.now.timestamp(), row.host

        def next_probe(due_at: str) -> str:
            left = float(due_at) - now
            return '<span class="warning">overdue</span>' if left <= 0 else f"in {_seconds(left)} s"

        def polling(after: str) -> str:
            if not probing:
                return ""
            return str(
                format_html(
                    ' data-probing hx-get="{}?view=row&amp;after={}" hx-trigger="every 1s"'
                    ' hx-swap="outerHTML"',
                    row_url("hosts:probe_status", host.name),
                    after or "0",
                )
            )

        def probe(button: str) -> str:
            if not services.user_may_probe(self.user, host):
                return ""
            return '<span class="muted">probing…</span>' if probing else button

        return {
            "age": lambda taken: _seconds(_age(now, taken)),
            "freshness": lambda taken: "stale" if _age(now, taken) > self.max_age else "fresh",
            "next_probe": next_probe,
            "probing": polling,
            "csrf": self.csrf,
            "probe": probe,
        }


def fill(html: str, fillers: dict[str, Callable[[str], str]]) -> str:
    """`html` with each hole filled: a block's filler is given the block's content (whose
    own holes are filled after)."""

    def one(match: re.Match[str]) -> str:
        if match["block"] is not None:
            return fill(fillers[match["block"]](match["body"]), fillers)
        return fillers[match["name"]](match["arg"])

    return _holes().sub(one, html)


def _render_facts(row: FleetRow) -> str:
    """The row with its holes, from its facts alone: no request, user or token in reach."""
    selectors.fleet_row_summarize(row)
    context = {
        "row": row,
        "host": row.host,
        "snapshot": row.snapshot,
        "summary": row.summary,
        "max_age": settings.SNAPSHOT_MAX_AGE_SECONDS,
    }
    return str(get_template(ROW_TEMPLATE).render(context))  # no request: no context processors


def rows_facts(rows: list[FleetRow]) -> list[str]:
    """Each row's HTML with its holes: from the cache, else rendered and kept."""
    cache = caches[CACHE]
    keys = [f"fleet-row:{row.key}" for row in rows]
    found = cache.get_many(keys)
    missing = [(key, row) for key, row in zip(keys, rows, strict=True) if key not in found]
    if missing:
        selectors.fleet_rows_read_state([row for _key, row in missing])
        rendered = {key: _render_facts(row) for key, row in missing}
        cache.set_many(rendered)
        found.update(rendered)
    return [found[key] for key in keys]


def rows_html(context: template.Context, rows: Iterable[FleetRow], *, probing: bool) -> SafeString:
    rows = list(rows)
    request = Request(context)
    filled = [
        fill(html, request.fillers(row, probing=probing))
        for row, html in zip(rows, rows_facts(rows), strict=True)
    ]
    return mark_safe("".join(filled))  # noqa: S308 (rendered with autoescape; holes are ours)


@register.simple_tag(takes_context=True)
def fleet_rows(context: template.Context, rows: Iterable[FleetRow]) -> SafeString:
    """The fleet table's rows."""
    return rows_html(context, rows, probing=False)


@register.simple_tag(takes_context=True)
def fleet_row(context: template.Context, row: FleetRow, probing: bool = False) -> SafeString:
    """One row, polling for its own probe while `probing` (the probe button's answer)."""
    return rows_html(context, [row], probing=probing)
