"""The JSON API's settings (Django REST framework, drf-spectacular): nothing in them comes from
the environment, and they are long."""

from __future__ import annotations

import importlib.util
from typing import Any

# Token first: a request without credentials then answers 401 with WWW-Authenticate: Bearer.
# Session auth serves the browsable API and keeps DRF's CSRF check on unsafe methods.
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "controlplane.api.authentication.APITokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "controlplane.api.permissions.HasRole",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # JSON only: the browsable API then offers its raw JSON form rather than HTML forms.
    "DEFAULT_PARSER_CLASSES": ["controlplane.api.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "controlplane.api.errors.api_exception_handler",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS: dict[str, Any] = {
    "TITLE": "GPU control plane API",
    "DESCRIPTION": "Hosts, snapshots, deployments, change requests and the audit log. "
    "Authenticate with a personal token from the API tokens page: "
    "`Authorization: Bearer <token>`. The same rules as the pages hold: a destructive change "
    "rests on a fresh snapshot (409 with its age and the limit otherwise), model swaps need a "
    "second person (403 with the reason), and every decision is in the audit log.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": [
        "rest_framework.permissions.IsAuthenticated",
        "controlplane.api.permissions.HasRole",
    ],
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "ENUM_NAME_OVERRIDES": {
        "SnapshotStatusEnum": "hosts.choices.SnapshotStatus",
        "ChangeStatusEnum": "deployments.choices.ChangeStatus",
        "StepStatusEnum": "deployments.choices.StepStatus",
        "ChangeKindEnum": "deployments.choices.ChangeKind",
        "EvaluationKindEnum": "deployments.choices.EvaluationKind",
    },
}
# Swagger UI's files vendored by drf-spectacular-sidecar (no CDN); without the package the
# docs page falls back to the browsable API. INSTALLED_APPS ends with API_DOCS_APPS.
API_DOCS_APPS: list[str] = []
if importlib.util.find_spec("drf_spectacular_sidecar") is not None:
    API_DOCS_APPS.append("drf_spectacular_sidecar")
    SPECTACULAR_SETTINGS.update(
        SWAGGER_UI_DIST="SIDECAR", SWAGGER_UI_FAVICON_HREF="SIDECAR", REDOC_DIST="SIDECAR"
    )
