"""What a probe round's verdicts cost does not grow per host: the evidence of any number of
hosts whose deployments serve revisions is read in a fixed number of queries, and each
revision's unit is read into a plan once per worker, not on every probe."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from deployments import services
from deployments.models import Deployment, DeploymentRevision
from deployments.services.verdicts import hosts_health_update
from deployments.unit_files import serving_plan
from hosts.models import Host
from tests import factories as f

pytestmark = pytest.mark.django_db
UNIT = f.UNIT


def _serving_hosts(names: list[str], model: Any) -> list[Host]:
    hosts = []
    for name in names:
        host = f.make_host(name)
        deployment = f.make_deployment(host, model)
        services.change_target_for(deployment=deployment, kind="restart")  # adopt revision 1
        deployment.refresh_from_db()
        parsed = f.parsed_state()
        parsed["deployments"][UNIT]["unit_file_sha256"] = deployment.current_revision.unit_sha256
        f.make_snapshot(host, parsed=parsed)
        hosts.append(host)
    return hosts


def _queries(hosts: list[Host]) -> int:
    fresh = list(Host.objects.filter(pk__in=[h.pk for h in hosts]))  # as a round loads them
    with CaptureQueriesContext(connection) as captured:
        hosts_health_update(hosts=fresh)
    return len(captured)


def test_a_rounds_verdicts_take_the_same_queries_for_two_hosts_or_six(catalog) -> None:
    two = _serving_hosts(["gpu-01", "gpu-02"], catalog["NVFP4"])
    six = two + _serving_hosts([f"gpu-0{i}" for i in range(3, 7)], catalog["NVFP4"])
    assert DeploymentRevision.objects.filter(deployment__host__in=six).count() == 6
    _queries(six)  # the first verdicts are inserted; the rounds after update them
    assert _queries(two) == _queries(six)


def test_the_verdict_reads_no_revision_benchmark(catalog) -> None:
    hosts = _serving_hosts(["gpu-01"], catalog["NVFP4"])
    DeploymentRevision.objects.update(benchmark={"levels": [{"concurrency": 64}] * 500})
    with CaptureQueriesContext(connection) as captured:
        hosts_health_update(hosts=hosts)
    revision_reads = [q["sql"] for q in captured if "deployments_deploymentrevision" in q["sql"]]
    assert revision_reads, "the serving revision is part of the evidence"
    assert not [sql for sql in revision_reads if '"benchmark"' in sql]


def test_a_revisions_plan_is_read_once_and_is_the_plan_of_its_unit(catalog) -> None:
    (host,) = _serving_hosts(["gpu-01"], catalog["NVFP4"])
    revision = Deployment.objects.get(host=host).current_revision
    assert revision is not None
    serving_plan._unit_plan.cache_clear()
    first = DeploymentRevision.objects.get(pk=revision.pk).plan
    again = DeploymentRevision.objects.get(pk=revision.pk).plan  # another round's object
    assert again is first
    assert serving_plan._unit_plan.cache_info()[:2] == (1, 1)  # (hits, misses)
    assert first == serving_plan.plan_from_unit_text(revision.unit_text, revision.file_variables)
    assert first.gpus_needed == 8


def test_the_plan_depends_on_the_environment_file_too() -> None:
    text = (
        "[Service]\nEnvironment=PORT=8000\n"
        "ExecStart=/opt/vllm/bin/vllm serve /models/m --port ${PORT} --tensor-parallel-size 2\n"
    )
    assert serving_plan.unit_plan(text).port == 8000
    assert serving_plan.unit_plan(text, {"PORT": "9000"}).port == 9000
    assert serving_plan.unit_plan(text).port == 8000
