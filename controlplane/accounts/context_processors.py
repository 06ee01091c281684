from typing import Any

from django.http import HttpRequest

from .roles import user_roles


def roles(request: HttpRequest) -> dict[str, Any]:
    held = user_roles(request.user)
    return {
        "user_roles": sorted(held),
        "is_operator": "operator" in held,
        "is_approver": "approver" in held,
    }
