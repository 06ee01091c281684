from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "controlplane.monitoring"
    label = "monitoring"
    verbose_name = "Prometheus metrics"
