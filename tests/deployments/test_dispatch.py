"""Each app sends its tasks by name through its dispatch module: every name there is a task the
worker registers (a typo would queue a message no worker takes)."""

from __future__ import annotations

import pytest
from celery import current_app

from controlplane.notifications import dispatch as notifications_dispatch
from deployments import dispatch as deployments_dispatch
from hosts import dispatch as hosts_dispatch


def task_names(module: object) -> list[str]:
    return [v for k, v in vars(module).items() if k.isupper() and isinstance(v, str)]


@pytest.mark.parametrize("module", [hosts_dispatch, deployments_dispatch, notifications_dispatch])
def test_every_dispatched_name_is_a_registered_task(module: object) -> None:
    current_app.loader.import_default_modules()  # the apps' tasks modules, as a worker loads them
    names = task_names(module)
    assert names
    assert set(names) <= set(current_app.tasks), set(names) - set(current_app.tasks)
