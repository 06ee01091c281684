from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "deployments"

    def ready(self) -> None:
        from typing import Any

        from hosts.signals import snapshot_recorded

        from . import services

        def void_drifted_approvals(sender: Any, snapshot: Any, **kwargs: Any) -> None:
            services.approvals_void_on_drift(snapshot=snapshot)

        snapshot_recorded.connect(
            void_drifted_approvals, weak=False, dispatch_uid="deployments-void-on-drift"
        )
