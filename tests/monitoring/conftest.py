"""Scraping /metrics the way Prometheus does, and reading samples back by name and labels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

TOKEN = "prometheus-scrape-token-0123456789"


@dataclass
class Scrape:
    samples: list[tuple[str, dict[str, str], float]]
    types: dict[str, str]

    def value(self, name: str, **labels: str) -> float:
        found = [v for n, ls, v in self.samples if n == name and ls == labels]
        assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
        return found[0]

    def series(self, name: str, **labels: str) -> list[tuple[dict[str, str], float]]:
        """Samples of `name` whose labels include `labels`."""
        return [
            (ls, v)
            for n, ls, v in self.samples
            if n == name and all(ls.get(k) == w for k, w in labels.items())
        ]


def parse(text: str) -> Scrape:
    samples = []
    types = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        samples += [(s.name, dict(s.labels), s.value) for s in family.samples]
    return Scrape(samples=samples, types=types)


@pytest.fixture
def metrics_token(settings: Any) -> str:
    settings.METRICS_TOKEN = TOKEN
    return TOKEN


@pytest.fixture
def scrape(client: Any, metrics_token: str) -> Any:
    """GET /metrics with the bearer token, as a Prometheus job configured per the README."""

    def get() -> Scrape:
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {metrics_token}")
        assert response.status_code == 200, response.content
        assert response["Content-Type"].startswith("text/plain; version=0.0.4")
        return parse(response.content.decode())

    return get
