from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "controlplane.notifications"
    label = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from . import receivers  # noqa: F401
