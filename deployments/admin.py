from django.contrib import admin

from .models import Deployment, ModelArtifact


@admin.register(ModelArtifact)
class ModelArtifactAdmin(admin.ModelAdmin):
    list_display = ("name", "variant", "weights_gib", "served_name", "engine", "path")
    list_filter = ("engine", "variant")
    search_fields = ("name", "served_name")


@admin.register(Deployment)
class DeploymentAdmin(admin.ModelAdmin):
    list_display = ("unit", "host", "model", "tensor_parallel_size", "port")
    list_filter = ("host",)
