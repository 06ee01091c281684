"""Sign-ins, sign-outs and failed sign-ins go to the audit log."""

from typing import Any

from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver

from controlplane.audit import services as audit
from controlplane.audit.actions import AuditAction

from .backends import IDENTITY_BACKEND


@receiver(user_logged_in)
def _logged_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    # A provider's user is also named by issuer and subject (audit.services adds them).
    session = getattr(request, "session", None)
    backend = session.get(BACKEND_SESSION_KEY) if session is not None else None
    method = "identity_provider" if backend == IDENTITY_BACKEND else "password"
    audit.record(
        actor=user,
        action=AuditAction.AUTH_LOGIN,
        target=user,
        request=request,
        data={"method": method},
    )


@receiver(user_logged_out)
def _logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if user is None:
        return
    ended = getattr(request, "_sign_in_ended", None)  # accounts.services.sign_in_end
    if ended:
        audit.record(
            actor=user,
            action=AuditAction.AUTH_SIGN_IN_ENDED,
            target=user,
            request=request,
            data={"reason": ended},
        )
        return
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
