"""The API tokens page: a user's own tokens, create one (shown once), revoke one."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from controlplane.accounts.decorators import role_required
from controlplane.accounts.roles import VIEWER

from .. import selectors, services
from ..forms import TokenCreateForm
from ..models import APIToken


@require_http_methods(["GET", "HEAD", "POST"])
@role_required(VIEWER)
def tokens(request: HttpRequest) -> HttpResponse:
    issued = None
    form = TokenCreateForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        issued = services.token_create(
            user=request.user, name=form.cleaned_data["name"], expires_at=form.expires_at()
        )
        form = TokenCreateForm()
    response = render(
        request,
        "api/tokens.html",
        {"form": form, "issued": issued, "tokens": selectors.tokens_of(user=request.user)},
        status=400 if request.method == "POST" and issued is None else 200,
    )
    if issued is not None:
        # The one response that carries the secret: keep it out of every cache.
        response["Cache-Control"] = "no-store"
    return response


@require_POST
@role_required(VIEWER)
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(APIToken, pk=pk, user=request.user)
    services.token_revoke(token=token, user=request.user)
    messages.success(request, f"Revoked {token}.")
    return redirect("api:tokens")
