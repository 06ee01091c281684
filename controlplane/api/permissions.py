"""Roles for API views, the same as the pages': any role reads, the rest is per action.

The services enforce the rules that matter (who may approve what, break-glass); these checks
mirror the pages' guards so that a request without the role is refused before its input is
even looked at.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from controlplane.accounts.roles import APPROVER, OPERATOR, VIEWER, has_role

# What a view may ask for in `required_roles`: one role, or any of several.
PROBE = (OPERATOR, APPROVER)


class HasRole(BasePermission):
    """`view.required_roles` maps an HTTP method to the role (or roles, any of which) it
    needs; methods not listed need the viewer role."""

    message = "This needs the viewer role."

    def has_permission(self, request: Request, view: Any) -> bool:
        needed = getattr(view, "required_roles", {}).get(request.method, VIEWER)
        roles = (needed,) if isinstance(needed, str) else tuple(needed)
        if any(has_role(request.user, role) for role in roles):
            return True
        self.message = f"This needs the {' or '.join(roles)} role."
        return False
