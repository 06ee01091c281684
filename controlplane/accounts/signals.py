"""Sign-ins, sign-outs and failed sign-ins go to the audit log."""

from typing import Any

from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction


@receiver(user_logged_in)
def _logged_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    audit.record(actor=user, action=AuditAction.AUTH_LOGIN, target=user, request=request)


@receiver(user_logged_out)
def _logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if user is not None:
        audit.record(actor=user, action=AuditAction.AUTH_LOGOUT, target=user, request=request)


@receiver(user_login_failed)
def _login_failed(
    sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any
) -> None:
    # Django already censors the password in `credentials`; keep only the user name.
    audit.record(
        actor=f"anonymous:{str(credentials.get('username', ''))[:150]}",
        action=AuditAction.AUTH_LOGIN_FAILED,
        request=request,
        data={"username": str(credentials.get("username", ""))[:150]},
    )
