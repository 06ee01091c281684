"""Reads about the API itself: a user's tokens. The apps' list reads live in their api/."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from .models import APIToken


def tokens_of(*, user: Any) -> QuerySet[APIToken]:
    return APIToken.objects.filter(user=user).order_by("-created_at", "-id")
