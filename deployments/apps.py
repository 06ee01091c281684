from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "deployments"

    def ready(self) -> None:
        from typing import Any

        from django.core import checks

        from controlplane.audit.signals import event_committed
        from hosts.signals import snapshots_recorded

        from . import services
        from .rollouts import receivers as rollout_receivers
        from .system_checks import check_approval_required_kinds, check_harmless_engine_flags

        checks.register(check_harmless_engine_flags)
        checks.register(check_approval_required_kinds)

        def void_drifted_approvals(sender: Any, snapshots: Any, **kwargs: Any) -> None:
            services.approvals_void_on_drift(snapshots=snapshots)

        def update_health(sender: Any, snapshots: Any, **kwargs: Any) -> None:
            services.hosts_health_update(hosts=[s.host for s in snapshots], snapshots=snapshots)

        snapshots_recorded.connect(
            void_drifted_approvals, weak=False, dispatch_uid="deployments-void-on-drift"
        )
        snapshots_recorded.connect(update_health, weak=False, dispatch_uid="deployments-health")
        event_committed.connect(
            rollout_receivers.change_ended, weak=False, dispatch_uid="deployments-rollouts"
        )
