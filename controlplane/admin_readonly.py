"""The admin class for evidence: rows anyone may read in the admin and nobody may change there."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest


class ReadOnlyAdmin(admin.ModelAdmin):
    """Snapshots, audit events, change requests and their records change only through services."""

    show_full_result_count = False  # no COUNT(*) over tables that grow without bound

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
