"""Admin: host groups with their hosts and the roles granted on them, what the identity
provider's groups map to, and (read-only) who people are at the provider. Every change is
audited by controlplane.audit.tracking, whichever page or command made it."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from controlplane.admin_readonly import ReadOnlyAdmin

from .models import GroupRoleMapping, HostGroup, Identity, IdentityGroup, RoleGrant


class RoleGrantInline(admin.TabularInline):
    model = RoleGrant
    extra = 0
    fields = ("user", "role")
    verbose_name = "role granted on this group"
    verbose_name_plural = "roles granted on this group"


class GroupRoleMappingInline(admin.TabularInline):
    model = GroupRoleMapping
    extra = 0
    fields = ("idp_group", "role")
    verbose_name = "identity provider group granting a role here"
    verbose_name_plural = "identity provider groups granting a role here"


@admin.register(HostGroup)
class HostGroupAdmin(admin.ModelAdmin):
    list_display = ("name", "description", "host_count", "created_at")
    search_fields = ("name", "description", "hosts__name")
    filter_horizontal = ("hosts",)
    inlines = [RoleGrantInline, GroupRoleMappingInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).annotate(host_count=Count("hosts"))

    @admin.display(description="hosts", ordering="host_count")
    def host_count(self, group: Any) -> int:
        return int(group.host_count)


@admin.register(RoleGrant)
class RoleGrantAdmin(admin.ModelAdmin):
    """A local account's role on one host group (a role everywhere is the role's Django group,
    kept on the user's page)."""

    list_display = ("user", "role", "host_group", "created_at")
    list_filter = ("role", "host_group")
    search_fields = ("user__username", "host_group__name")
    list_select_related = ("user", "host_group")


@admin.register(GroupRoleMapping)
class GroupRoleMappingAdmin(admin.ModelAdmin):
    list_display = ("idp_group", "role", "where", "created_at")
    list_filter = ("role", "host_group")
    search_fields = ("idp_group", "host_group__name")
    list_select_related = ("host_group",)

    @admin.display(description="host group", ordering="host_group__name")
    def where(self, mapping: GroupRoleMapping) -> str:
        return mapping.host_group.name if mapping.host_group is not None else "every host"


class IdentityGroupInline(admin.TabularInline):
    model = IdentityGroup
    extra = 0
    can_delete = False
    fields = ("name",)
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Identity)
class IdentityAdmin(ReadOnlyAdmin):
    """Written by sign-in through the identity provider only: what it last said."""

    list_display = ("user", "subject", "issuer", "groups_checked_at")
    search_fields = ("user__username", "subject", "groups__name")
    list_select_related = ("user",)
    inlines = [IdentityGroupInline]


@admin.register(IdentityGroup)
class IdentityGroupAdmin(ReadOnlyAdmin):
    list_display = ("name", "identity")
    search_fields = ("name", "identity__user__username")
    list_select_related = ("identity__user",)
