"""Two change jobs starting at once on a model that has no coherence suite yet must both get the
one default suite (seen under load: the second insert hit the unique constraint and failed its
job). Real threads, each on its own PostgreSQL connection, committed transactions."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from deployments.evaluation import coherence
from deployments.evaluation.models import CoherenceCheck
from tests import factories as f
from tests.audit.conftest import require_postgresql

JOBS = 6
MODELS = 5


@pytest.mark.django_db(transaction=True)
def test_jobs_starting_together_share_one_default_suite() -> None:
    require_postgresql()
    catalog = f.make_catalog()
    models = list(catalog.values())[:MODELS]
    errors: list[BaseException] = []
    suites: list[list[int]] = []

    def job(model: object, start: threading.Barrier) -> None:
        try:
            start.wait()
            suites.append([c.pk for c in coherence.suite_for(model)])
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    for model in models:
        start = threading.Barrier(JOBS)
        threads = [threading.Thread(target=job, args=(model, start)) for _ in range(JOBS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    assert not errors, errors
    for model in models:
        assert CoherenceCheck.objects.filter(model=model).count() == len(
            coherence.default_suite(model.smoke_prompt, model.smoke_expect)
        )
    assert len({tuple(s) for s in suites}) == len(models)  # every job of a model saw one suite
