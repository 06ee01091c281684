"""Who may do what, for every URL the project serves, generated from the URL configuration.

Every pattern `get_resolver()` knows is listed (pages, htmx endpoints, the JSON API under
/api/v1/, /metrics, the admin), and each must be declared in RULES below with the least role
that may use each method. A URL that is not declared fails the suite, so a new view cannot
arrive without someone saying who may use it, and the matrix then proves the view checks it.

Each URL is requested by every persona (anonymous, signed in without a role, viewer, operator,
approver, administrator, and people whose role holds on one host group only: an operator and an
approver of team-a, the world's host's group, and of team-b, another group) with every method
(GET, POST, PUT, PATCH, DELETE); the API both with a personal token and with a session. Session
requests carry a real CSRF token read from a page, as a browser sends it. What is expected:

- anonymous: sent to sign in (a redirect for pages, HX-Redirect for htmx, 401/403 for the API);
- below the least role: 403 (404 only where the rule says the URL hides what exists, or where
  the URL names a host outside the persona's scope);
- at or above it: never 401, 403, 405 or a trip to the sign-in page (400, 404, 409 or a redirect
  elsewhere are fine: the permission check passed and the input or the state decided);
- a role held on the world's host's group counts as the role on every URL about that host;
- a role held on another group only: 404 on every URL that names the world's host or a row of
  it (a snapshot, deployment, change, revision, its timeline), exactly as for a host that does
  not exist, never 403 (which would say it exists); and the world's host in no list, count,
  search or export (test_people_of_another_group_never_see_the_host);
- a method the rule does not list: 405 for anyone who passes the rule's checks.

The admin is staff-only as a whole: every admin URL but its own sign-in and sign-out sends
anyone who is not staff to the admin's sign-in page.

Each request runs in a savepoint that is rolled back, so every one of them meets the same rows.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import resolve_url
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern
from rest_framework.test import APIClient

from controlplane.accounts.models import HostGroup, RoleGrant
from controlplane.api import services as token_services
from controlplane.audit.models import AuditEvent
from controlplane.notifications import services as notification_services
from controlplane.notifications.choices import EventType
from deployments import services as change_services
from deployments.rollouts import requests as rollout_requests
from hosts import services as host_services
from hosts.models import Host
from tests import factories as f

pytestmark = pytest.mark.django_db

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
# People whose role holds on one host group only (a RoleGrant): team-a holds the world's host,
# team-b another host.
IN_SCOPE = ("team_a_operator", "team_a_approver")
ELSEWHERE = ("team_b_operator", "team_b_approver")
PERSONAS = (
    "anonymous",
    "outsider",
    "viewer",
    "operator",
    "approver",
    "admin",
    *IN_SCOPE,
    *ELSEWHERE,
)

# The least role a method needs, as the sets of personas that hold it. Roles are not a ladder:
# an approver is not an operator. "probe" is the operator or the approver role; "requester" is
# the operator who asked for the world's change and rollout (or an administrator).
VIEWER, PROBE, OPERATOR, APPROVER, ADMIN = "viewer", "probe", "operator", "approver", "admin"
REQUESTER = "requester"
# A rollout is paused, resumed or aborted by its requester or by an approver of its hosts.
CONTROLLER = "requester or approver"
OPERATORS = {"operator", "team_a_operator", "team_b_operator"}
APPROVERS = {"approver", "team_a_approver", "team_b_approver"}
HOLDERS = {
    VIEWER: {"viewer", "admin", *OPERATORS, *APPROVERS},
    PROBE: {"admin", *OPERATORS, *APPROVERS},
    OPERATOR: {"admin", *OPERATORS},
    APPROVER: {"admin", *APPROVERS},
    REQUESTER: {"operator", "admin"},
    CONTROLLER: {"operator", "admin", *APPROVERS},
    ADMIN: {"admin"},
}


@dataclass(frozen=True)
class Rule:
    """How a URL is used (kind) and the least role for each method it answers."""

    kind: str  # page, htmx (a fragment), api, public (anyone), staff (the admin)
    methods: dict[str, str] = field(default_factory=dict)
    hides_existence: bool = False  # below the least role, 404 rather than 403 is right


def page(**methods: str) -> Rule:
    return Rule("page", methods)


def htmx(**methods: str) -> Rule:
    return Rule("htmx", methods)


def api(**methods: str) -> Rule:
    return Rule("api", methods)


PUBLIC = Rule("public")
STAFF = Rule("staff")

# THE TABLE. A URL name (or, for an unnamed pattern, its route) -> who may use it.
RULES: dict[str, Rule] = {
    # signing in and out, and the browser's favicon
    "favicon.ico": PUBLIC,
    "login": PUBLIC,
    "logout": PUBLIC,
    "admin:login": PUBLIC,
    "admin:logout": PUBLIC,
    # the identity provider's two legs (404 when none is configured)
    "accounts:oidc_start": PUBLIC,
    "accounts:oidc_callback": PUBLIC,
    # the fleet and hosts
    "hosts:dashboard": page(GET=VIEWER),
    "hosts:dashboard_rows": htmx(GET=VIEWER),
    "hosts:detail": page(GET=VIEWER),
    "hosts:probe": htmx(POST=PROBE),
    "hosts:probe_status": htmx(GET=VIEWER),
    "hosts:gpu_series": page(GET=VIEWER),  # JSON the host page's script fetches
    "hosts:accept_key": page(POST=ADMIN),
    "hosts:journal": htmx(GET=VIEWER),
    "hosts:snapshot": page(GET=VIEWER),
    # an operator of the host (or an administrator); anyone with a role reads it
    "hosts:maintenance": page(GET=VIEWER, POST=OPERATOR),
    "hosts:maintenance_leave": page(POST=OPERATOR),
    # changes
    "deployments:change_form": page(GET=OPERATOR, POST=OPERATOR),
    "deployments:change_preflight": htmx(POST=OPERATOR),
    # "Probe again" on the change form, and the card that follows that probe
    "deployments:change_form_probe": htmx(POST=OPERATOR),
    "deployments:change_form_snapshot": htmx(GET=OPERATOR),
    "deployments:revisions": page(GET=VIEWER),
    "deployments:changes": page(GET=VIEWER),
    "deployments:change": page(GET=VIEWER),
    "deployments:approve": page(POST=APPROVER),
    "deployments:reject": page(POST=APPROVER),
    "deployments:break_glass": page(POST=ADMIN),
    # the requester (an operator), or an approver who is also an operator
    "deployments:cancel": page(POST=REQUESTER),
    "deployments:approvals": page(GET=VIEWER),
    "deployments:gpu_diagnostic": page(POST=OPERATOR),
    # rollouts: every role reads; an operator requests; an approver decides; the requester (an
    # operator) or an approver pauses, resumes and aborts (the services check every host)
    "rollouts:list": page(GET=VIEWER),
    "rollouts:create": page(GET=OPERATOR, POST=OPERATOR),
    "rollouts:detail": page(GET=VIEWER),
    "rollouts:approve": page(POST=APPROVER),
    "rollouts:reject": page(POST=APPROVER),
    "rollouts:pause": page(POST=CONTROLLER),
    "rollouts:resume": page(POST=CONTROLLER),
    "rollouts:abort": page(POST=CONTROLLER),
    # the audit log
    "audit:history": page(GET=VIEWER),
    "audit:verify": page(GET=VIEWER),  # "Verify now": read-only, as the API's verify
    "audit:event": page(GET=VIEWER),
    "audit:host_timeline": htmx(GET=VIEWER),
    "audit:export_csv": page(GET=VIEWER),
    "audit:export_jsonl": page(GET=VIEWER),
    # notifications: everyone reads deliveries, administrators manage endpoints
    "notifications:index": page(GET=VIEWER),
    "notifications:delivery": page(GET=VIEWER),
    "notifications:endpoint_create": page(GET=ADMIN, POST=ADMIN),
    "notifications:endpoint_edit": page(GET=ADMIN, POST=ADMIN),
    "notifications:endpoint_active": page(POST=ADMIN),
    "notifications:endpoint_delete": page(GET=ADMIN, POST=ADMIN),
    "notifications:endpoint_test": page(POST=ADMIN),
    # Prometheus (with METRICS_TOKEN unset, a person signed in with a role)
    "monitoring:metrics": page(GET=VIEWER),
    # API tokens: a page, each user's own tokens
    "api:tokens": page(GET=VIEWER, POST=VIEWER),
    "api:token_revoke": page(POST=VIEWER),
    "api:docs": page(GET=VIEWER),
    # the JSON API
    "api:root": api(GET=VIEWER),
    "api:schema": api(GET=VIEWER),
    "api:host-list": api(GET=VIEWER),
    "api:host-detail": api(GET=VIEWER),
    "api:host-snapshots": api(GET=VIEWER, POST=PROBE),
    "api:host-snapshot-latest": api(GET=VIEWER),
    "api:host-maintenance": api(GET=VIEWER, POST=OPERATOR, DELETE=OPERATOR),
    "api:snapshot-detail": api(GET=VIEWER),
    "api:deployment-list": api(GET=VIEWER),
    "api:deployment-detail": api(GET=VIEWER),
    "api:deployment-revision-list": api(GET=VIEWER),
    "api:revision-evaluation-list": api(GET=VIEWER),
    "api:benchmark-profile-list": api(GET=VIEWER),
    "api:benchmark-profile-detail": api(GET=VIEWER),
    "api:drain-hook-list": api(GET=VIEWER),
    "api:model-list": api(GET=VIEWER),
    "api:model-detail": api(GET=VIEWER),
    "api:change-list": api(GET=VIEWER, POST=OPERATOR),
    "api:change-detail": api(GET=VIEWER),
    "api:change-approve": api(POST=APPROVER),
    "api:change-reject": api(POST=APPROVER),
    "api:change-break-glass": api(POST=ADMIN),
    "api:change-cancel": api(POST=REQUESTER),
    "api:rollout-list": api(GET=VIEWER, POST=OPERATOR),
    "api:rollout-detail": api(GET=VIEWER),
    "api:rollout-approve": api(POST=APPROVER),
    "api:rollout-reject": api(POST=APPROVER),
    "api:rollout-pause": api(POST=CONTROLLER),
    "api:rollout-resume": api(POST=CONTROLLER),
    "api:rollout-abort": api(POST=CONTROLLER),
    "api:audit-event-list": api(GET=VIEWER),
    "api:audit-event-detail": api(GET=VIEWER),
    "api:audit-export": api(GET=VIEWER),
    "api:audit-verify": api(GET=VIEWER),
    "api:host-unit-journal": api(GET=VIEWER),
    "api:snapshot-diff": api(GET=VIEWER),
    # each user's own tokens (another's is a 404 for the holder, as if it did not exist)
    "api:my-token-list": api(GET=VIEWER, POST=VIEWER),
    "api:my-token-revoke": api(POST=VIEWER),
}
# Every URL in these namespaces is the admin's: staff only, unless RULES says otherwise.
STAFF_NAMESPACES = ("admin",)
# URL arguments that name the world's host or a row of it (its audit event's seq included), and
# the rows whose <pk> does.
HOST_PARAMS = {"name", "unit", "host_id", "seq"}
HOST_ROWS = {"deployments", "changes", "snapshots", "rollouts"}


# --- the URL configuration ----------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    key: str  # the URL name with its namespaces, or the route when it has no name
    route: str  # the whole route, prefixes included
    regex: bool

    @property
    def host_bound(self) -> bool:
        """Whether the URL names the world's host or a row of it: someone whose role holds on
        another host group only must find nothing there."""
        for match in _PARAM.finditer(self.route):
            name = match.group(1) or match.group(2)
            if name in HOST_PARAMS:
                return True
            owner = re.findall(r"([\w-]+)/$", self.route[: match.start()])
            if name == "pk" and owner and owner[-1] in HOST_ROWS:
                return True
        return False

    @property
    def rule(self) -> Rule | None:
        if self.key in RULES:
            return RULES[self.key]
        if self.key.split(":")[0] in STAFF_NAMESPACES or self.route.startswith("admin/"):
            return STAFF
        return None


def routes() -> list[Route]:
    found: list[Route] = []

    def walk(resolver: URLResolver, prefix: str, namespace: str, regex: bool) -> None:
        for entry in resolver.url_patterns:
            is_regex = regex or isinstance(entry.pattern, RegexPattern)
            if isinstance(entry, URLResolver):
                inner = namespace
                if entry.namespace:
                    inner = f"{namespace}:{entry.namespace}" if namespace else entry.namespace
                walk(entry, prefix + str(entry.pattern), inner, is_regex)
            elif isinstance(entry, URLPattern):
                route = prefix + str(entry.pattern)
                if entry.name:
                    key = f"{namespace}:{entry.name}" if namespace else entry.name
                else:
                    key = route
                found.append(Route(key, route, is_regex))

    walk(get_resolver(), "", "", False)
    return found


def test_every_url_is_declared_with_who_may_use_it() -> None:
    keys = {r.key for r in routes()}
    missing = sorted(r.key for r in routes() if r.rule is None)
    assert not missing, (
        "These URLs are not in the authorization table: declare each in RULES in "
        f"tests/security/test_authorization_matrix.py with the least role per method: {missing}"
    )
    stale = sorted(set(RULES) - keys)
    assert not stale, f"RULES names URLs that no longer exist: {stale}"
    for key, rule in RULES.items():
        assert set(rule.methods) <= set(METHODS), key
        assert set(rule.methods.values()) <= set(HOLDERS), key


# --- rows for the URLs' arguments ----------------------------------------------------------------


@dataclass
class World:
    users: dict[str, User | None]
    values: dict[str, str]
    pks: dict[str, int]


def scoped_persona(username: str, role: str, group: HostGroup) -> User:
    user = User.objects.create_user(username, f"{username}@example.test", "not-used")
    RoleGrant.objects.create(user=user, role=role, host_group=group)
    return user


@pytest.fixture
def world(viewer, operator, approver, outsider, admin_user) -> World:
    catalog = f.make_catalog()
    # Nothing listens on port 1: SSH fails fast as unreachable. The key's name does not say the
    # host's: whoever may not see the host must not find its name anywhere (its key's events
    # are about no host, and stay in everyone's audit log).
    key = host_services.credential_create(name="matrix-key", private_key=f.CLIENT_KEY)
    host = host_services.host_create(name="gpu-01", address="127.0.0.1", port=1, credential=key)
    Host.objects.filter(pk=host.pk).update(host_key=f.HOST_KEY, host_key_status="pinned")
    host.refresh_from_db()
    other = host_services.host_create(name="gpu-77", address="127.0.0.1", port=1, credential=key)
    team_a = host_services.host_group_join(hosts=[host], name="team-a")
    team_b = host_services.host_group_join(hosts=[other], name="team-b")
    scoped = {
        f"{team.name.replace('-', '_')}_{role}": scoped_persona(f"{team.name}-{role}", role, team)
        for team in (team_a, team_b)
        for role in ("operator", "approver")
    }
    deployment = f.make_deployment(host, catalog["NVFP4"])
    snapshot = f.make_snapshot(host)
    change = change_services.change_request_create(
        user=operator, deployment=deployment, kind="model_swap", snapshot=snapshot,
        reason="INT4 serves more tokens per second", model=catalog["INT4"],
    )  # fmt: skip
    # A public address, so the endpoint saves without asking DNS (webhooks may not go inside).
    endpoint = notification_services.endpoint_create(
        actor=admin_user, name="ops", url="https://93.184.216.34/ops",
        secret="whsec-matrix-0123456789", event_types=[EventType.APPROVAL_NEEDED],
    )  # fmt: skip
    delivery = notification_services.endpoint_send_test(actor=admin_user, endpoint=endpoint)
    token = token_services.token_create(user=operator, name="matrix").token
    event = AuditEvent.objects.filter(host_id=host.pk).order_by("-seq").first()
    assert event is not None and change.target_revision is not None
    profile = f.default_benchmark_profile()
    rollout = rollout_requests.rollout_create(
        user=operator, kind="restart", reason="pick up the new driver", hosts=[host],
        wave_size=1, max_down=1,
    )  # fmt: skip
    return World(
        users={
            "anonymous": None,
            "outsider": outsider,
            "viewer": viewer,
            "operator": operator,
            "approver": approver,
            "admin": admin_user,
            **scoped,
        },
        values={
            "name": host.name,
            "unit": deployment.unit,
            "kind": "restart",
            "seq": str(event.seq),
            "host_id": str(host.pk),
            "number": str(change.from_revision.number),
            "object_id": "1",
            "content_type_id": "1",
            "id": str(admin_user.pk),
            "app_label": "hosts",
            "url": "nowhere/",
            "other": str(snapshot.pk),
        },
        pks={
            "deployments": deployment.pk,
            "changes": change.pk,
            "snapshots": snapshot.pk,
            "endpoints": endpoint.pk,
            "deliveries": delivery.pk,
            "tokens": token.pk,
            "models": catalog["INT4"].pk,
            "benchmark-profiles": profile.pk,
            "rollouts": rollout.pk,
        },
    )


_PARAM = re.compile(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>[^)]*\)")


def path_of(route: Route, world: World) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name == "pk":
            owner = re.findall(r"([\w-]+)/$", route.route[: match.start()])
            assert owner and owner[-1] in world.pks, f"{route.key}: which row is <pk> of?"
            return str(world.pks[owner[-1]])
        assert name in world.values, f"{route.key}: no value for <{name}>; add one to world()"
        return world.values[name]

    path = _PARAM.sub(value, route.route)
    if route.regex:
        path = path.replace("^", "").replace("$", "")
    return "/" + path


# --- the personas' clients -----------------------------------------------------------------------


@dataclass
class Caller:
    persona: str
    via: str  # session, token or nothing (anonymous)
    client: Client
    csrf: str = ""


def csrf_token_of(client: Client) -> str:
    """The token a browser would send, read from the sign-in page's form."""
    body = client.get(resolve_url(settings.LOGIN_URL)).content.decode()
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', body)
    assert match, "the sign-in page carries no CSRF token"
    return match.group(1)


def session_caller(persona: str, user: User | None) -> Caller:
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    return Caller(persona, "session", client, csrf_token_of(client))


def token_caller(persona: str, user: User) -> Caller:
    client = APIClient()
    secret = token_services.token_create(user=user, name=f"matrix-{persona}").secret
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return Caller(persona, "token", client)


# --- judging one answer --------------------------------------------------------------------------


def send(caller: Caller, method: str, path: str, rule: Rule, *, csrf: bool = True) -> HttpResponse:
    headers: dict[str, str] = {}
    if rule.kind == "htmx":
        headers["HX-Request"] = "true"
    if caller.via == "session" and method in UNSAFE and csrf:
        headers["X-CSRFToken"] = caller.csrf
    body: dict[str, Any] = {}
    if method != "GET" and (rule.kind == "api" or method != "POST"):
        body = {"data": "{}", "content_type": "application/json"}
    call = getattr(caller.client, method.lower())
    cookies = copy.deepcopy(caller.client.cookies)  # a sign-out must not outlive its request
    with transaction.atomic():
        response: HttpResponse = call(path, headers=headers, **body)
        transaction.set_rollback(True)
    caller.client.cookies = cookies
    return response


def to_sign_in(response: HttpResponse, rule: Rule) -> bool:
    login = resolve_url(settings.LOGIN_URL)
    if rule.kind == "staff":  # the admin's own sign-in, or the project's for the anonymous
        where = response.get("Location", "")
        return response.status_code == 302 and where.startswith(("/admin/login/", login))
    if rule.kind == "api":
        return response.status_code in (401, 403)
    if rule.kind == "htmx" and response.status_code == 200:
        return response.get("HX-Redirect", "").startswith(login)
    return response.status_code == 302 and response["Location"].startswith(login)


def passed(response: HttpResponse, rule: Rule) -> bool:
    status = response.status_code
    if status in (401, 403, 405) or status >= 500 or to_sign_in(response, rule):
        return False
    return not (rule.kind == "htmx" and response.get("HX-Redirect", "").startswith("/login"))


def problem(
    caller: Caller, method: str, rule: Rule, response: HttpResponse, *, host_bound: bool = False
) -> str | None:
    """What is wrong with this answer, or None. `host_bound`: the URL names the world's host
    or a row of it."""
    status = response.status_code
    if status >= 500:
        return "a server error"
    if rule.kind == "public":
        return None
    least = rule.methods.get(method)
    holders = HOLDERS.get(least or "", set())
    is_staff = caller.persona == "admin"
    if rule.kind == "staff":
        if is_staff:  # past the staff check (read-only models still refuse to add or delete)
            return None if not to_sign_in(response, rule) else "staff sent to sign in"
        return None if to_sign_in(response, rule) or status == 405 else "not sent to sign in"
    if caller.persona == "anonymous":
        if to_sign_in(response, rule) or (least is None and status == 405):
            return None
        return "anonymous not sent to sign in"
    if least is None:  # a method this URL does not answer
        passes_any = any(caller.persona in HOLDERS[r] for r in rule.methods.values())
        if status == 405 or (not passes_any and status == 403):
            return None
        return "a method the URL should not answer"
    hidden = host_bound and caller.persona in ELSEWHERE
    if caller.persona in holders:
        if hidden:  # the role, but on another host group: the host does not exist for them
            return None if status == 404 else "a host outside the scope answered other than 404"
        return None if passed(response, rule) else f"refused though it holds {least}"
    if status == 403 or ((rule.hides_existence or hidden) and status == 404):
        return None
    return f"not refused with 403 below {least}"


def describe(caller: Caller, method: str, path: str, response: HttpResponse, what: str) -> str:
    where = response.get("Location") or response.get("HX-Redirect") or ""
    return (
        f"{method} {path} as {caller.persona} ({caller.via}): {response.status_code}"
        f"{' -> ' + where if where else ''}: {what}"
    )


def run_matrix(routes_: list[Route], callers: dict[str, list[Caller]], world: World) -> list[str]:
    problems: list[str] = []
    for route in routes_:
        rule = route.rule
        assert rule is not None, route.key
        path = path_of(route, world)
        for method in METHODS:
            for persona in PERSONAS:
                for caller in callers[persona]:
                    if caller.via == "token" and rule.kind != "api":
                        continue
                    response = send(caller, method, path, rule)
                    found = problem(caller, method, rule, response, host_bound=route.host_bound)
                    if found:
                        problems.append(describe(caller, method, path, response, found))
    return problems


@pytest.fixture
def callers(world: World) -> dict[str, list[Caller]]:
    made: dict[str, list[Caller]] = {}
    for persona, user in world.users.items():
        made[persona] = [session_caller(persona, user)]
        if user is not None:
            made[persona].append(token_caller(persona, user))
    return made


def test_every_role_gets_exactly_what_the_table_says_on_pages_and_htmx(
    world, callers, private_queue
):
    chosen = [r for r in routes() if r.rule is not None and r.rule.kind in ("page", "htmx")]
    problems = run_matrix(chosen, callers, world)
    assert len(chosen) >= 35
    assert not problems, f"{len(problems)} answers break the table:\n" + "\n".join(problems)


def test_every_role_gets_exactly_what_the_table_says_on_the_api(world, callers, private_queue):
    chosen = [r for r in routes() if r.rule is not None and r.rule.kind in ("api", "public")]
    problems = run_matrix(chosen, callers, world)
    assert len(chosen) >= 25
    assert not problems, f"{len(problems)} answers break the table:\n" + "\n".join(problems)


def test_the_admin_is_for_staff_only(world, callers):
    chosen = [r for r in routes() if r.rule is STAFF]
    assert len(chosen) >= 100
    only = {p: [c for c in cs if c.via == "session"] for p, cs in callers.items()}
    problems: list[str] = []
    for route in chosen:
        path = path_of(route, world)
        # A role on one host group makes nobody staff: one such persona stands for them all.
        for persona in (*PERSONAS[: PERSONAS.index("admin") + 1], IN_SCOPE[0]):
            # What matters is who gets in; GET and POST (with the CSRF token) are enough to say.
            for method in ("GET", "POST") if persona != "admin" else ("GET",):
                for caller in only[persona]:
                    response = send(caller, method, path, STAFF)
                    found = problem(caller, method, STAFF, response)
                    if found:
                        problems.append(describe(caller, method, path, response, found))
    assert not problems, f"{len(problems)} answers break the table:\n" + "\n".join(problems)


# --- host groups: lists, counts, searches, exports ------------------------------------------


def body_text(response: HttpResponse) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    return response.content.decode()


# Where the world's host shows for whoever sees it: its row, its change, its events, its gauges.
SHOWN_IN = (
    "hosts:dashboard", "hosts:dashboard_rows", "deployments:changes", "deployments:approvals",
    "audit:history", "audit:export_csv", "audit:export_jsonl", "monitoring:metrics",
    "api:host-list", "api:deployment-list", "api:change-list", "api:audit-event-list",
    "api:audit-export",
)  # fmt: skip


def test_people_of_another_group_never_see_the_host(world, callers):
    """Every page and API answer that does not name the world's host (lists, counts, searches
    for it, exports) says nothing of it to someone whose role holds on another group, and shows
    it to someone whose role holds on its group."""
    listing = [
        r for r in routes()
        if r.rule is not None and r.rule.kind in ("page", "htmx", "api")
        and r.rule.methods.get("GET") == VIEWER and not r.host_bound
    ]  # fmt: skip
    assert {r.key for r in listing} >= set(SHOWN_IN)
    problems = []
    for route in listing:
        rule = route.rule
        assert rule is not None
        # Searches for it: part of its name (the whole of it would be echoed in the search box)
        # and its id, which the audit log's host filter takes.
        for query in ("", "?q=pu-01&text=pu-01", f"?host={world.values['host_id']}"):
            path = path_of(route, world) + query
            for persona in (*IN_SCOPE, *ELSEWHERE):
                for caller in callers[persona]:
                    if caller.via == "token" and rule.kind != "api":
                        continue
                    response = send(caller, "GET", path, rule)
                    body = body_text(response)
                    if response.status_code != 200:
                        problems.append(describe(caller, "GET", path, response, "not a list"))
                    elif persona in ELSEWHERE and "gpu-01" in body:
                        problems.append(describe(caller, "GET", path, response, "shows gpu-01"))
                    elif (
                        persona in IN_SCOPE
                        and not query
                        and route.key in SHOWN_IN
                        and "gpu-01" not in body
                    ):
                        problems.append(describe(caller, "GET", path, response, "hides it"))
    assert not problems, f"{len(problems)} answers break the scope:\n" + "\n".join(problems)


def test_the_counts_are_the_scopes(world, callers):
    waiting = {}
    for persona in ("team_a_approver", "team_b_approver"):
        session = next(c for c in callers[persona] if c.via == "session")
        body = body_text(send(session, "GET", "/approvals/", RULES["deployments:approvals"]))
        waiting[persona] = re.search(r'id="approvals-count">(\d+) waiting', body)[1]  # type: ignore[index]
    assert waiting == {"team_a_approver": "1", "team_b_approver": "0"}


# --- CSRF ----------------------------------------------------------------------------------------


def test_every_state_changing_request_without_a_csrf_token_is_refused(world, callers):
    """Signed in with every role the URL needs, a POST (PUT, ...) without the token is refused
    before the view runs: pages, htmx endpoints, sign-out, and the API with a session."""
    admin = next(c for c in callers["admin"] if c.via == "session")
    checked = 0
    problems = []
    for route in routes():
        rule = route.rule
        if rule is None or rule.kind == "staff":
            continue
        unsafe = [m for m in rule.methods if m in UNSAFE]
        if route.key in ("login", "logout"):
            unsafe = ["POST"]
        for method in unsafe:
            path = path_of(route, world)
            response = send(admin, method, path, rule, csrf=False)
            checked += 1
            body = response.content.decode(errors="replace")
            if response.status_code != 403 or "CSRF" not in body:
                problems.append(describe(admin, method, path, response, "accepted without CSRF"))
    assert checked >= 20
    assert not problems, "\n".join(problems)
