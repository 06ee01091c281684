"""What an administrator keeps: which identity provider group grants which role, where. The
identities themselves are the provider's word, shown here, never edited (a sign-in or a
re-check rewrites them)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from .models import GroupRoleMapping, Identity, IdentityGroup


@admin.register(GroupRoleMapping)
class GroupRoleMappingAdmin(admin.ModelAdmin):
    list_display = ("idp_group", "role", "host_group", "created_at")
    list_filter = ("role", "host_group")
    search_fields = ("idp_group",)


class IdentityGroupInline(admin.TabularInline):
    model = IdentityGroup
    extra = 0
    can_delete = False
    readonly_fields = ("name",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Identity)
class IdentityAdmin(admin.ModelAdmin):
    list_display = ("user", "issuer", "subject", "groups_checked_at")
    search_fields = ("user__username", "subject")
    readonly_fields = ("user", "issuer", "subject", "groups_checked_at", "created_at")
    inlines = [IdentityGroupInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
