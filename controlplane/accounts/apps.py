from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "controlplane.accounts"
    label = "accounts"

    def ready(self) -> None:
        from controlplane.accounts import signals  # noqa: F401
