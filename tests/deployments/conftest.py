"""Rows most deployment tests start from: the Kimi catalog, one host, and its deployment."""

from __future__ import annotations

import pytest

from tests import factories as f


@pytest.fixture
def catalog(db):
    return f.make_catalog()


@pytest.fixture
def host(db):
    return f.make_host("gpu-01")


@pytest.fixture
def deployment(host, catalog):
    return f.make_deployment(host, catalog["NVFP4"])
