"""Rows for tests that do not need SSH: hosts, deployments and snapshots with realistic state."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import asyncssh
from django.utils import timezone

from deployments.models import Deployment, ModelArtifact
from hosts import services as host_services
from hosts.choices import HostKeyStatus
from hosts.models import Host, StateSnapshot
from hosts.state import snapshot_digest

UNIT = "vllm-kimi-k25.service"
_KEY = asyncssh.generate_private_key("ssh-ed25519")
HOST_KEY = _KEY.export_public_key("openssh").decode().strip()
_CLIENT = asyncssh.generate_private_key("ssh-ed25519")
CLIENT_KEY = _CLIENT.export_private_key().decode()
CLIENT_PUBLIC_KEY = _CLIENT.export_public_key("openssh").decode().strip()


def parsed_state(
    *, main_pid: int = 41003, model: str = "kimi-k2.5", running: float = 0, gpus: int = 8,
    active: str = "active", used_mib: int = 96900,
) -> dict[str, Any]:  # fmt: skip
    return {
        "gpus": [
            {
                "index": i,
                "uuid": f"GPU-{i:08d}",
                "name": "NVIDIA RTX PRO 6000",
                "memory_used_mib": used_mib,
                "memory_total_mib": 97887,
                "power_draw_w": 90.5,
                "power_limit_w": 600.0,
                "utilization_pct": 0,
                "temperature_c": 35,
            }
            for i in range(gpus)
        ],
        "compute_apps": [],
        "deployments": {
            UNIT: {
                "unit": {
                    "unit": UNIT,
                    "load_state": "loaded",
                    "active_state": active,
                    "sub_state": "running",
                    "main_pid": main_pid,
                    "active_enter_timestamp": "Mon 2026-11-30 09:12:41 UTC",
                    "n_restarts": 0,
                    "fragment_path": f"/etc/systemd/system/{UNIT}",
                },
                "unit_file_sha256": "a" * 64,
                "server": {
                    "healthy": True,
                    "health_http_status": 200,
                    "models": [model],
                    "model_roots": [],
                    "max_model_len": 262144,
                    "requests_running": running,
                    "requests_waiting": 0.0,
                    "kv_cache_usage": 0.0,
                },
                "integrity": None,
            }
        },
        "problems": [],
    }


def make_host(name: str = "gpu-01", **kwargs: Any) -> Host:
    credential = host_services.credential_create(name=f"{name}-key", private_key=CLIENT_KEY)
    host = host_services.host_create(
        name=name, address="127.0.0.1", port=kwargs.pop("port", 2201), credential=credential,
        **kwargs,
    )  # fmt: skip
    Host.objects.filter(pk=host.pk).update(host_key=HOST_KEY, host_key_status=HostKeyStatus.PINNED)
    host.refresh_from_db()
    return host


def make_catalog() -> dict[str, ModelArtifact]:
    def artifact(variant: str, gib: float, served: str) -> ModelArtifact:
        return ModelArtifact.objects.create(
            name="moonshotai/Kimi-K2.5", variant=variant, weights_gib=gib,
            path=f"/models/moonshotai/Kimi-K2.5-{variant}", served_name=served,
        )  # fmt: skip

    return {
        "NVFP4": artifact("NVFP4", 595, "kimi-k2.5"),
        "INT4": artifact("INT4", 555, "kimi-k2.5-int4"),
        "FP8": artifact("FP8", 1030, "kimi-k2.5-fp8"),
    }


def make_deployment(host: Host, model: ModelArtifact) -> Deployment:
    return Deployment.objects.create(host=host, unit=UNIT, model=model, tensor_parallel_size=8)


def make_snapshot(
    host: Host,
    *,
    status: str = "ok",
    age: float = 5.0,
    parsed: dict[str, Any] | None = None,
    includes_integrity: bool = False,
) -> StateSnapshot:
    parsed = copy.deepcopy(parsed if parsed is not None else parsed_state())
    snapshot = StateSnapshot(
        host=host,
        taken_at=timezone.now() - dt.timedelta(seconds=age),
        status=status,
        trigger="manual",
        duration_ms=120,
        parsed=parsed,
        digest=snapshot_digest(parsed),
        includes_integrity=includes_integrity,
    )
    snapshot.save()
    return snapshot


def make_integrity_snapshot(
    host: Host,
    *,
    modified: tuple[str, ...] = (),
    version: str = "0.11.2",
    age: float = 5.0,
    error: str | None = None,
) -> StateSnapshot:
    """A snapshot whose probe also ran the engine integrity check of the unit's engine."""
    parsed = parsed_state()
    parsed["deployments"][UNIT]["integrity"] = {
        "dist": None if error else "vllm",
        "version": None if error else version,
        "checked": 0 if error else 1873,
        "modified": list(modified),
        "missing": [],
        "added": [],
        "error": error,
    }
    return make_snapshot(host, age=age, parsed=parsed, includes_integrity=True)


def default_benchmark_profile() -> Any:
    """The default profile the migration creates (a transactional test's flush removes it)."""
    from deployments.models import BenchmarkProfile

    return BenchmarkProfile.objects.get_or_create(
        name="standard",
        defaults={
            "is_default": True,
            "concurrency_levels": [1, 8, 32, 64],
            "input_tokens": 128,
            "output_tokens": 256,
            "requests_per_stream": 1,
        },
    )[0]
