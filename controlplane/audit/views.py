"""The audit log's pages: history, one event, a host's timeline, exports. Read-only for every
role: there is no view here that writes, and every view answers GET and HEAD only. Each shows
only the events a person's scope allows (controlplane.audit.selectors)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any, cast

from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_safe
from django_htmx.http import push_url

from controlplane.accounts.decorators import role_required
from controlplane.accounts.roles import VIEWER
from controlplane.htmx import is_partial

from . import export, selectors
from .forms import EventFilterForm
from .selectors import EventFilter
from .streaming import selectors as stream_selectors


def _cursor(request: HttpRequest, name: str) -> int | None:
    value = request.GET.get(name, "")
    return int(value) if value.isdigit() else None


def _filters(request: HttpRequest) -> tuple[EventFilterForm, EventFilter | None]:
    form = EventFilterForm(request.GET)
    return form, (form.to_filter() if form.is_valid() else None)


@require_safe
@role_required(VIEWER)
def history(request: HttpRequest) -> HttpResponse:
    return _history(request, verification=selectors.verification_shown())


@require_safe
@role_required(VIEWER)
def verify_now(request: HttpRequest) -> HttpResponse:
    """ "Verify now": walk the chain and its checkpoints for this page, as the API's read-only
    verify does (stored nowhere, no event: see selectors.VerificationShown); htmx swaps the
    header, a plain request gets the whole page with it."""
    shown = selectors.verification_shown(now=True)
    if is_partial(request):
        context = {"verification": shown, "checkpoint": selectors.checkpoint_latest()}
        return render(request, "audit/history.html#integrity", context)
    return _history(request, verification=shown)


def _history(
    request: HttpRequest, *, verification: selectors.VerificationShown | None
) -> HttpResponse:
    form, filters = _filters(request)
    page = None
    if filters is not None:
        page = selectors.events_page(
            filters=filters,
            user=request.user,
            before=_cursor(request, "before"),
            after=_cursor(request, "after"),
        )
    context: dict[str, Any] = {
        "form": form,
        "filters": filters,
        "query": filters.querystring() if filters else "",
        "page": page,
    }
    if is_partial(request):
        # "Load older" swaps in more rows; the filter form swaps the whole result block.
        if request.htmx.target != "audit-results":  # type: ignore[attr-defined]
            return render(request, "audit/history.html#rows", context)
        response = render(request, "audit/history.html#results", context)
        # The address bar gets the filter without its empty fields, as a link would carry it.
        query = context["query"]
        return push_url(response, reverse("audit:history") + (f"?{query}" if query else ""))
    context.update(
        verification=verification,
        checkpoint=selectors.checkpoint_latest(),
        streams=stream_selectors.stream_statuses(),
        now=timezone.now(),
        quick_ranges=_quick_ranges(timezone.now()),
    )
    return render(request, "audit/history.html", context)


def _quick_ranges(now: dt.datetime) -> list[tuple[str, str]]:
    """Links that fill "since" in UTC: the last hour, day and week."""
    spans = (("last hour", dt.timedelta(hours=1)), ("last 24 h", dt.timedelta(days=1)),
             ("last 7 days", dt.timedelta(days=7)))  # fmt: skip
    return [(label, f"{(now - span).astimezone(dt.UTC):%Y-%m-%d %H:%M}") for label, span in spans]


@require_safe
@role_required(VIEWER)
def event_detail(request: HttpRequest, seq: int) -> HttpResponse:
    event = selectors.event_get(seq=seq, user=request.user)
    if event is None:
        raise Http404("No such audit event.")
    story = selectors.event_story(event=event, user=request.user)
    return render(
        request,
        "audit/event_detail.html",
        {
            "event": event,
            "diff": selectors.event_diff(event=event),
            "data_rest": selectors.event_data_rest(event=event),
            "story": story,
            "story_truncated": len(story) >= selectors.STORY_LIMIT,
        },
    )


@require_safe
@role_required(VIEWER)
def host_timeline(request: HttpRequest, host_id: int) -> HttpResponse:
    """The host page's timeline on its own, for htmx to load or refresh; a host outside the
    user's scope is not found."""
    if not selectors.host_in_scope(host_id=host_id, user=request.user):
        raise Http404("No such host.")
    return render(
        request,
        "audit/partials/host_timeline.html",
        {"timeline_events": selectors.host_timeline(host_id), "timeline_host_id": host_id},
    )


# --- export --------------------------------------------------------------------------------


def _export(request: HttpRequest, kind: str) -> HttpResponseBase:
    form, filters = _filters(request)
    if filters is None:
        return HttpResponse("Invalid filter: " + form.errors.as_text(), status=400)
    rows = selectors.events_export_rows(filters=filters, user=request.user)
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    if kind == "csv":
        body: Iterator[str] = export.csv_lines(rows)
        content_type, ext = "text/csv; charset=utf-8", "csv"
    else:
        body = export.jsonl_lines(rows)
        content_type, ext = "application/x-ndjson; charset=utf-8", "jsonl"
    response = StreamingHttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.{ext}"'
    response["Cache-Control"] = "no-store"
    return response


@require_safe
@role_required(VIEWER)
def export_csv(request: HttpRequest) -> HttpResponse:
    return _as_response(_export(request, "csv"))


@require_safe
@role_required(VIEWER)
def export_jsonl(request: HttpRequest) -> HttpResponse:
    return _as_response(_export(request, "jsonl"))


def _as_response(response: HttpResponseBase) -> HttpResponse:
    # role_required is typed for HttpResponse; Django serves a StreamingHttpResponse the same.
    return cast(HttpResponse, response)
