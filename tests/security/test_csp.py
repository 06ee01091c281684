"""The Content-Security-Policy: on every answer, and honoured by every page and template.

The policy (controlplane/settings.py) allows scripts and styles from our own static files only.
A browser would silently drop whatever breaks it, so these tests look for what would break it
before a browser does: every page a viewer, an operator, an approver or an administrator can
GET (the URLs come from the URL configuration, as in the authorization matrix) answers with the
enforced header, and its HTML carries no inline script, no on*= handler, no style attribute or
<style> element, no javascript: URL and nothing htmx would have to eval. The templates are
checked too, for the branches that the walk's rows do not reach (refusal banners, lockout,
the database-unavailable page). tests/browser/test_csp_browser.py asks Chromium itself.
"""

from __future__ import annotations

import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import cast

import pytest
from django.apps import apps
from django.conf import settings
from django.db import transaction
from django.http import HttpResponse
from django.test import Client
from django.urls import reverse

from tests.security.test_authorization_matrix import (
    HOLDERS,
    STAFF,
    Route,
    World,
    path_of,
    routes,
    world,  # noqa: F401 (a fixture)
)

REQUIRED = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}
# Script types a browser runs; anything else (application/json data blocks) is inert data.
SCRIPT_TYPES = {"", "text/javascript", "application/javascript", "module"}
# Attributes that carry a URL a browser would follow or submit to.
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "hx-get", "hx-post", "data"}
TEMPLATES = Path(settings.BASE_DIR) / "templates"


def directives(header: str) -> dict[str, str]:
    parsed = (part.strip().split(None, 1) for part in header.split(";") if part.strip())
    return {d[0]: d[1] if len(d) > 1 else "" for d in parsed}


# --- what breaks the policy in a page -----------------------------------------------------------


class Breaches(HTMLParser):
    """Parses a page and lists what the policy would block (or what needs eval to work)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: (value or "") for name, value in attrs}
        where = f"<{tag} {' '.join(f'{n}={v!r}' for n, v in values.items())}>"[:160]
        if tag == "script":
            kind = values.get("type", "").strip().lower()
            if "src" not in values and kind in SCRIPT_TYPES:
                self.found.append(f"inline script: {where}")
        if tag == "style":
            self.found.append(f"inline <style> element: {where}")
        for name, value in values.items():
            bare = name.removeprefix("data-")
            if name.startswith("on"):
                self.found.append(f"event handler attribute {name}: {where}")
            elif name == "style":
                self.found.append(f"style attribute: {where}")
            elif bare.startswith("hx-on") or bare == "hx-vars":
                self.found.append(f"{name} (htmx evaluates it): {where}")
            elif bare == "hx-trigger" and "[" in value:
                self.found.append(f"hx-trigger filter (htmx evaluates it): {where}")
            elif bare == "hx-vals" and value.strip().startswith(("js:", "javascript:")):
                self.found.append(f"hx-vals with script (htmx evaluates it): {where}")
            if (name in URL_ATTRIBUTES or bare in URL_ATTRIBUTES) and re.match(
                r"\s*javascript:", value, re.IGNORECASE
            ):
                self.found.append(f"javascript: URL in {name}: {where}")


def breaches(html: str) -> list[str]:
    parser = Breaches()
    parser.feed(html)
    parser.close()
    return parser.found


def test_the_checker_sees_each_kind_of_breach() -> None:
    """The checker is what the other tests rest on: it must see each thing it looks for."""
    assert (
        breaches(
            '<script src="/static/a.js"></script><script type="application/json">{"a": 1}</script>'
            '<a href="/x" data-confirm="sure?" hx-trigger="every 15s">x</a>'
        )
        == []
    )
    bad = [
        "<script>alert(1)</script>",
        '<script type="module">import "x"</script>',
        '<button onclick="go()">x</button>',
        '<body onload="go()">',
        '<div style="width:3%"></div>',
        "<style>p { color: red }</style>",
        '<a href="javascript:go()">x</a>',
        '<form action=" JavaScript:go()"></form>',
        '<form hx-on::after-request="go()"></form>',
        '<div data-hx-on:click="go()"></div>',
        "<tbody hx-trigger=\"every 15s [!document.querySelector('tr')]\"></tbody>",
        '<div hx-vals="js:{a: go()}"></div>',
    ]
    for html in bad:
        assert len(breaches(html)) == 1, html


# --- every page, as every role ------------------------------------------------------------------

PERSONAS = ("viewer", "operator", "approver", "admin")


def may_get(route: Route, persona: str) -> bool:
    rule = route.rule
    if rule is None:
        return False
    if rule is STAFF:
        return persona == "admin"
    if rule.kind == "public":
        return True
    least = rule.methods.get("GET")
    return least is not None and persona in HOLDERS[least]


BROWSER_ACCEPT = "text/html,application/xhtml+xml,*/*;q=0.8"


def admin_object_world(route: Route, world: World) -> World:  # noqa: F811
    """The matrix names object 1 for every admin change page, which need not exist (then the
    admin only redirects); here each admin URL gets a row of its own model, so that its form is
    rendered and checked."""
    parts = route.route.split("/")
    if parts[0] != "admin" or "<path:object_id>" not in parts:
        return world
    try:
        model = apps.get_model(parts[1], parts[2])
    except LookupError:  # admin/r/<content_type_id>/<object_id>/, the "view on site" link
        return world
    pk = model._default_manager.order_by("pk").values_list("pk", flat=True).first()
    if pk is None:
        return world
    return replace(world, values={**world.values, "object_id": str(pk)})


def get(client: Client, route: Route, path: str) -> HttpResponse:
    assert route.rule is not None
    headers = {"Accept": BROWSER_ACCEPT}  # as a browser asks: the API answers in HTML too
    if route.rule.kind == "htmx":
        headers["HX-Request"] = "true"
    with transaction.atomic():  # every page meets the same rows
        response = client.get(path, headers=headers)
        transaction.set_rollback(True)
    return cast(HttpResponse, response)


def body_of(response: HttpResponse) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")  # type: ignore[attr-defined]
    return response.content.decode(errors="replace")


@pytest.mark.django_db
def test_every_page_each_role_can_open_carries_the_policy_and_keeps_to_it(
    world: World,  # noqa: F811
) -> None:
    problems: list[str] = []
    pages = 0
    for persona in PERSONAS:
        user = world.users[persona]
        assert user is not None
        client = Client(raise_request_exception=False)
        client.force_login(user)
        for route in routes():
            if not may_get(route, persona) or route.key == "logout":
                continue
            path = path_of(route, admin_object_world(route, world))
            response = get(client, route, path)
            if response.status_code >= 500:
                problems.append(f"GET {path} as {persona}: {response.status_code}")
                continue
            header = response.get("Content-Security-Policy")
            if not header:
                problems.append(f"GET {path} as {persona}: no Content-Security-Policy header")
                continue
            if "Content-Security-Policy-Report-Only" in response:
                problems.append(f"GET {path} as {persona}: a report-only policy as well")
            if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
                continue
            pages += 1
            problems += [f"GET {path} as {persona}: {b}" for b in breaches(body_of(response))]
    assert not problems, f"{len(problems)} breaches of the policy:\n" + "\n".join(problems)
    # Each role's pages, htmx fragments, the API's browsable pages and docs, the whole admin.
    assert pages >= 200, pages


@pytest.mark.django_db
def test_the_browsable_api_renders_every_list(world: World) -> None:  # noqa: F811
    """DRF's browsable renderer asks each list view for get_queryset() (its filter form): a
    view without one answered a browser with a 500."""
    viewer = world.users["viewer"]
    assert viewer is not None
    client = Client(raise_request_exception=False)
    client.force_login(viewer)
    chosen = [r for r in routes() if r.rule is not None and r.rule.kind == "api"]
    assert len(chosen) >= 20
    for route in chosen:
        if "GET" not in route.rule.methods:  # type: ignore[union-attr]
            continue
        response = client.get(path_of(route, world), headers={"Accept": BROWSER_ACCEPT})
        assert response.status_code < 500, route.key


def test_the_policy_is_enforced_and_strict(client: Client) -> None:
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert "Content-Security-Policy-Report-Only" not in response
    policy = directives(response["Content-Security-Policy"])
    for name, value in REQUIRED.items():
        assert policy.get(name) == value, (name, policy.get(name))
    assert policy["img-src"].split() == ["'self'", "data:"]
    header = response["Content-Security-Policy"]
    for loophole in ("'unsafe-inline'", "'unsafe-eval'", "'unsafe-hashes'", "*", "http:"):
        assert loophole not in header.split(), loophole
    assert breaches(response.content.decode()) == []


def test_an_anonymous_visitor_gets_the_policy_on_the_way_to_sign_in(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert directives(response["Content-Security-Policy"])["script-src"] == "'self'"


# --- every template, every branch ---------------------------------------------------------------

DJANGO_COMMENTS = re.compile(r"\{#.*?#\}|\{%\s*comment\s*%\}.*?\{%\s*endcomment\s*%\}", re.S)


def test_no_template_breaks_the_policy_in_any_branch() -> None:
    """The walk above renders each page with the rows it has; a template also has branches
    those rows do not reach. Its source (Django comments aside) must pass the same checker."""
    problems: list[str] = []
    templates = sorted(TEMPLATES.rglob("*.html"))
    assert len(templates) >= 30
    for template in templates:
        source = DJANGO_COMMENTS.sub("", template.read_text())
        problems += [f"{template.relative_to(TEMPLATES)}: {b}" for b in breaches(source)]
    assert not problems, "\n".join(problems)


def test_htmx_is_told_to_inject_no_style_and_to_eval_nothing() -> None:
    base = (TEMPLATES / "base.html").read_text()
    meta = re.search(r'<meta name="htmx-config" content=\'([^\']*)\'>', base)
    assert meta, "base.html sets no htmx-config"
    assert '"includeIndicatorStyles":false' in meta.group(1)
    assert '"allowEval":false' in meta.group(1)
