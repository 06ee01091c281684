"""The model catalog and the deployments that serve models on hosts."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from hosts import validators
from hosts.models import Host

from .choices import Engine, Quantization


class ModelArtifact(models.Model):
    """One build of a model as it lies on the hosts' disks (e.g. Kimi-K2.5 in NVFP4)."""

    name = models.CharField(max_length=200, validators=[validators.validate_model_id])
    variant = models.CharField(max_length=10, choices=Quantization.choices)
    weights_gib = models.FloatField(validators=[MinValueValidator(0.1), MaxValueValidator(100_000)])
    path = models.CharField(max_length=500, validators=[validators.validate_abs_path])
    served_name = models.CharField(
        max_length=128,
        validators=[validators.validate_served_name],
        help_text="The id the server reports in /v1/models.",
    )
    engine = models.CharField(max_length=10, choices=Engine.choices, default=Engine.VLLM)
    smoke_prompt = models.CharField(max_length=500, default="The capital of France is")
    smoke_expect = models.CharField(
        max_length=100, default="Paris", help_text="A coherent completion contains this text."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "variant"]
        constraints = [
            models.UniqueConstraint(fields=["name", "variant"], name="artifact_name_variant"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.variant})"


class Deployment(models.Model):
    """A systemd service on a host that serves one model with one set of engine arguments."""

    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="deployments")
    unit = models.CharField(max_length=200, validators=[validators.validate_unit_name])
    model = models.ForeignKey(ModelArtifact, on_delete=models.PROTECT, related_name="deployments")
    engine_binary = models.CharField(
        max_length=300,
        default="/opt/vllm/.venv/bin/vllm",
        validators=[validators.validate_abs_path],
    )
    engine_python = models.CharField(
        max_length=300,
        default="/opt/vllm/.venv/bin/python3",
        validators=[validators.validate_abs_path],
        help_text="Interpreter of the engine's install, used by the integrity check.",
    )
    engine_dist = models.CharField(
        max_length=100, default="vllm", validators=[validators.validate_dist_name]
    )
    tensor_parallel_size = models.PositiveSmallIntegerField(
        default=8, validators=[MinValueValidator(1), MaxValueValidator(64)]
    )
    max_model_len = models.PositiveIntegerField(
        default=262144, validators=[MinValueValidator(256), MaxValueValidator(10_000_000)]
    )
    port = models.PositiveIntegerField(
        default=8000, validators=[MinValueValidator(1024), MaxValueValidator(65535)]
    )
    extra_args = models.JSONField(
        default=list, blank=True, validators=[validators.validate_engine_args]
    )
    load_timeout_seconds = models.PositiveIntegerField(
        default=900, validators=[MinValueValidator(5), MaxValueValidator(7200)]
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["host__name", "unit"]
        constraints = [
            models.UniqueConstraint(fields=["host", "unit"], name="deployment_host_unit"),
            models.UniqueConstraint(fields=["host", "port"], name="deployment_host_port"),
        ]

    def __str__(self) -> str:
        return f"{self.unit} on {self.host}"
