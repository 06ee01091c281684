"""What Grafana draws as annotations: each event the control plane records as a gauge whose
value is the event's time, read by the bundled dashboard's Prometheus annotation queries with
"Series value as timestamp".

Why Prometheus and not an annotations endpoint: a stock Grafana reads annotations from the data
sources it has, and the dashboard already has Prometheus. A JSON endpoint would need a plugin
(Infinity or JSON API, neither bundled) and a second data source holding a token; Grafana's own
annotation store would need the control plane to push to Grafana with a Grafana token. Because
the value is the event's own time, a change scraped late (Prometheus down, or started before
the first scrape) still lands where it happened, as long as it is scraped within the window.

Each source below is one family of event timestamps and the query the dashboard runs on it
(changes, rollouts); tests/monitoring/test_dashboard.py fails until the dashboard draws every
source, and test_docs.py until the monitoring README names its family.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from prometheus_client.core import Metric

from controlplane.accounts.roles import Scope

from .change_events import change_families
from .rollout_events import rollout_families


@dataclass(frozen=True)
class EventSource:
    """One kind of event drawn on the dashboard."""

    name: str  # the dashboard annotation's name
    family: str  # the gauge holding each event's Unix time
    # reads (now, and the scope of a person signed in: None for the scraper, every host);
    # its families, this one included
    collect: Callable[[dt.datetime, Scope | None], Iterable[Metric]]
    title: str  # Grafana's titleFormat, over the family's labels
    text: str  # textFormat
    tags: str  # tagKeys
    # Its events are about one host (a `host` label the dashboard's host filter selects on);
    # a rollout's are about many, so they are drawn whichever hosts the panels show.
    per_host: bool = True


CHANGES = EventSource(
    name="Changes",
    family="controlplane_change_event_timestamp_seconds",
    collect=change_families,
    title="{{kind}} {{event}} on {{host}}",
    text="change #{{change}} {{unit}}: {{from_model}} → {{model}} {{outcome}}",
    tags="host,kind,event,outcome",
)

ROLLOUTS = EventSource(
    name="Rollouts",
    family="controlplane_rollout_event_timestamp_seconds",
    collect=rollout_families,
    title="rollout #{{rollout}} {{kind}} {{event}} {{wave}}",
    text="{{model}} · {{status}} · host group {{host_group}}",
    tags="kind,event,status,host_group",
    per_host=False,
)

EVENT_SOURCES: tuple[EventSource, ...] = (CHANGES, ROLLOUTS)


def annotation_expr(source: EventSource) -> str:
    """The dashboard's query: milliseconds, as Grafana reads a value used as a timestamp."""
    selector = '{host=~"$host"}' if source.per_host else ""
    return f"{source.family}{selector} * 1000"
