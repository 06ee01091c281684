"""The URLs of a server that predates rollouts: the product's own, less /api/v1/rollouts/...,
so such a server answers them as any path it lacks (Django's plain 404 page)."""

from django.urls import URLPattern, URLResolver, include, path

from controlplane import urls as root
from controlplane.api import urls as api
from deployments.api import urls as deployments_api

Patterns = list[URLPattern | URLResolver]


def _replaced(patterns: Patterns, module: object, by: URLResolver) -> Patterns:
    return [by if getattr(p, "urlconf_module", None) is module else p for p in patterns]


_deployments = [p for p in deployments_api.urlpatterns if not str(p.pattern).startswith("rollouts")]
_api = _replaced(api.urlpatterns, deployments_api, path("", include(_deployments)))
urlpatterns = _replaced(root.urlpatterns, api, path("api/v1/", include((_api, "api"))))
handler403 = root.handler403
handler500 = root.handler500
