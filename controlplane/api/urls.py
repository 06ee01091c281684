"""The JSON API under /api/v1/, its schema and docs, and the token page.

LoginRequiredMiddleware would send a token request (anonymous to Django's session auth) to
the sign-in page, so API views are exempt from it (DRF's as_view marks them so too; saying
it here keeps that visible) and DRF answers 401 itself.
"""

from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.contrib.auth.decorators import login_not_required, login_required
from django.urls import URLPattern, URLResolver, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from .views import audit, changes, deployments, hosts, root, tokens

app_name = "api"


def api(view: Any) -> Callable[..., Any]:
    return login_not_required(view.as_view())


def docs_view() -> Callable[..., Any]:
    if apps.is_installed("drf_spectacular_sidecar"):
        from drf_spectacular.views import SpectacularSwaggerView

        # Swagger UI's files come from drf-spectacular-sidecar, served locally: no CDN. A page
        # for people: without a session, sign in first (rather than DRF's bare 401).
        return login_required(SpectacularSwaggerView.as_view(url_name="api:schema"))
    # Without it, the browsable API is the documentation.
    return RedirectView.as_view(pattern_name="api:root")


urlpatterns: list[URLPattern | URLResolver] = [
    path("", api(root.APIRoot), name="root"),
    path("schema/", login_not_required(SpectacularAPIView.as_view()), name="schema"),
    path("docs/", docs_view(), name="docs"),
    # hosts and snapshots
    path("hosts/", api(hosts.HostList), name="host-list"),
    path("hosts/<str:name>/", api(hosts.HostDetail), name="host-detail"),
    path("hosts/<str:name>/snapshots/", api(hosts.HostSnapshots), name="host-snapshots"),
    path(
        "hosts/<str:name>/snapshots/latest/",
        api(hosts.HostSnapshotLatest),
        name="host-snapshot-latest",
    ),
    path("snapshots/<int:pk>/", api(hosts.SnapshotDetail), name="snapshot-detail"),
    # deployments and the model catalog
    path("deployments/", api(deployments.DeploymentList), name="deployment-list"),
    path("deployments/<int:pk>/", api(deployments.DeploymentDetail), name="deployment-detail"),
    path("models/", api(deployments.ModelList), name="model-list"),
    path("models/<int:pk>/", api(deployments.ModelDetail), name="model-detail"),
    # change requests
    path("changes/", api(changes.ChangeList), name="change-list"),
    path("changes/<int:pk>/", api(changes.ChangeDetail), name="change-detail"),
    path("changes/<int:pk>/approve/", api(changes.ChangeApprove), name="change-approve"),
    path("changes/<int:pk>/reject/", api(changes.ChangeReject), name="change-reject"),
    path("changes/<int:pk>/break-glass/", api(changes.ChangeBreakGlass), name="change-break-glass"),
    path("changes/<int:pk>/cancel/", api(changes.ChangeCancel), name="change-cancel"),
    # the audit log
    path("audit/events/", api(audit.AuditEventList), name="audit-event-list"),
    path("audit/events/<int:seq>/", api(audit.AuditEventDetail), name="audit-event-detail"),
    path("audit/export/", api(audit.AuditExport), name="audit-export"),
    # the token page (HTML, signed in with a session)
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", tokens.token_revoke, name="token_revoke"),
]
