"""Numbered pages for the lists people keep open: the fleet and the approvals queue.

(The audit history pages by keyset on seq instead: it never counts its rows.)
"""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator

# Rows per page on the fleet and the approvals queue, as on the audit history.
PAGE_SIZE = 50


def numbered_page(
    object_list: Any, requested: str | None, *, per_page: int = PAGE_SIZE
) -> tuple[Page[Any], str]:
    """The page `?page=` asks for, and a note when it is not the one shown.

    A value that is not a page number gets the first page, and a page past the end the last
    one, each with a note saying so: never an error, so rows polled by htmx keep refreshing
    when the list shrinks under a user (an approval leaves the queue, a host is removed).
    """
    paginator = Paginator(object_list, per_page)
    value = (requested or "").strip()
    if not value:
        return paginator.page(1), ""
    # isascii: "²".isdigit() is true and int("²") fails.
    digits = value.lstrip("0")
    if not (value.isascii() and value.isdigit()) or not digits:
        return paginator.page(1), f"“{_cut(value)}” is not a page number: this is page 1."
    last = paginator.num_pages
    # (Python refuses int() of more than 4,300 digits; no list has a billion pages.)
    if len(digits) > 9 or int(digits) > last:
        note = f"There is no page {_cut(digits)}: this is the last page, {last}."
        return paginator.page(last), note
    return paginator.page(int(digits)), ""


def _cut(text: str, limit: int = 20) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
