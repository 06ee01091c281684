"""Fixtures for the JSON API's tests: token-authenticated clients for each persona, and rows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from controlplane.api import services as token_services
from deployments.models import Deployment, ModelArtifact
from tests import factories as f

ApiFor = Callable[[User | None], APIClient]


@pytest.fixture
def api_for(db: None) -> ApiFor:
    """`api_for(user)`: a client sending a fresh token of `user`; `api_for(None)`: none."""

    def make(user: User | None) -> APIClient:
        client = APIClient()
        if user is not None:
            secret = token_services.token_create(user=user, name="tests").secret
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        return client

    return make


@pytest.fixture
def catalog(db: None) -> dict[str, ModelArtifact]:
    return f.make_catalog()


@pytest.fixture
def deployment(catalog: dict[str, ModelArtifact]) -> Deployment:
    """gpu-01 serving Kimi-K2.5 NVFP4, host key pinned, never probed."""
    return f.make_deployment(f.make_host("gpu-01"), catalog["NVFP4"])


def refusal(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) >= {"detail", "code"}, body
    return body
