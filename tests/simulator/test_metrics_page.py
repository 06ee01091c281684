"""/metrics made again only when something it shows moved (simulator.http.metrics): each page
is byte for byte the page a fresh rendering gives, on the host's own clock."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from simulator.http import metrics as metrics_page
from tests.simulator.on_machine import Host, host

METRICS = "curl -s http://127.0.0.1:8000/metrics"


def page(h: Host) -> str:
    stdout, stderr, status = h.run(METRICS)
    assert (status, stderr) == (0, ""), stderr
    return stdout


def fresh_page(h: Host) -> str:
    """The page with nothing rendered before, at the same instant."""
    kept = dict(metrics_page._PAGES)
    metrics_page._PAGES.clear()
    try:
        return page(h)
    finally:
        metrics_page._PAGES.update(kept)


COMPLETION = (
    "curl -s http://127.0.0.1:8000/v1/completions -H 'Content-Type: application/json' "
    """-d '{"model": "kimi-k2.5", "prompt": "Hi", "max_tokens": 4}'"""
)


def _restart(h: Host) -> None:
    unit = h.machine.lookup_unit("vllm-kimi-k25.service")
    assert unit is not None
    h.machine.restart(unit)


@pytest.mark.parametrize(
    ("change", "moves"),
    [
        pytest.param(lambda h: None, False, id="nothing"),
        pytest.param(lambda h: h.machine.set_inflight(3, 2), True, id="requests-in-flight"),
        pytest.param(lambda h: h.run(COMPLETION), True, id="a-request-served"),
        pytest.param(lambda h: h.machine.set_fault("engine_core_died"), True, id="core-died"),
        pytest.param(_restart, True, id="restarted"),
    ],
)
def test_each_page_is_the_page_a_fresh_rendering_gives(
    change: Callable[[Host], object], moves: bool
) -> None:
    h = host()
    h.advance(5)  # loaded
    first = page(h)
    assert first == fresh_page(h) == page(h)

    change(h)
    h.advance(60)
    again = page(h)

    assert again == fresh_page(h)
    assert (again != first) == moves
    h.advance(60)
    assert page(h) == fresh_page(h)


def test_the_pages_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_page, "PAGES_MAX", 2)
    metrics_page._PAGES.clear()
    hosts = [host(name=f"gpu-0{i}") for i in range(1, 5)]
    for h in hosts:
        h.advance(5)
        page(h)

    assert len(metrics_page._PAGES) == 2
