"""The JSON API under /api/v1/, its schema and docs, and the token page.

Each app's API lives beside the app (NetBox's layout) and is included here, in this one `api`
namespace, so every URL keeps its name (api:host-list, api:change-detail, ...). This module and
the root view are the only parts of controlplane.api that know the apps.
"""

from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.contrib.auth.decorators import login_not_required, login_required
from django.urls import URLPattern, URLResolver, include, path
from django.views.decorators.http import require_safe
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from .views import root, token_api, tokens
from .views.base import endpoint

app_name = "api"


def docs_view() -> Callable[..., Any]:
    if apps.is_installed("drf_spectacular_sidecar"):
        from drf_spectacular.views import SpectacularSwaggerSplitView

        # Swagger UI's files come from drf-spectacular-sidecar, served locally: no CDN. A page
        # for people: without a session, sign in first (rather than DRF's bare 401). The split
        # view serves its start-up script from this URL too (`?script`), not inline, as the
        # Content Security Policy requires; it answers GET (and HEAD) only.
        view = SpectacularSwaggerSplitView.as_view(url_name="api:schema")
        return login_required(require_safe(view))
    # Without it, the browsable API is the documentation.
    return RedirectView.as_view(pattern_name="api:root")


urlpatterns: list[URLPattern | URLResolver] = [
    path("", endpoint(root.APIRoot), name="root"),
    path("schema/", login_not_required(SpectacularAPIView.as_view()), name="schema"),
    path("docs/", docs_view(), name="docs"),
    # hosts/, snapshots/
    path("", include("hosts.api.urls")),
    # deployments/, models/, changes/
    path("", include("deployments.api.urls")),
    # audit/events/, audit/export/, audit/verify/
    path("", include("controlplane.audit.api.urls")),
    # your own tokens as JSON (the command line's `cpctl tokens`)
    path("me/tokens/", endpoint(token_api.TokenList), name="my-token-list"),
    path("me/tokens/<int:pk>/revoke/", endpoint(token_api.TokenRevoke), name="my-token-revoke"),
    # the token page (HTML, signed in with a session)
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", tokens.token_revoke, name="token_revoke"),
]
