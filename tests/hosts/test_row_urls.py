"""`{% row_url %}` writes exactly what `{% url %}` writes, for any argument."""

from __future__ import annotations

import pytest
from django.template import Context, Template
from django.test import override_settings
from django.urls import NoReverseMatch, reverse, set_script_prefix

from hosts.templatetags.row_urls import row_url

NAMES = ["gpu-01", "a.b_c~d", "9", ".", "..", "...", "a b", "ü-gpu", "<x>", "a%2Fb", "GPU-01"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("view", ["hosts:detail", "hosts:probe", "hosts:probe_status"])
def test_it_writes_what_reverse_writes(view, name):
    assert row_url(view, name) == reverse(view, args=[name])


@pytest.mark.parametrize("pk", [1, 12345, 0, "77"])
def test_it_writes_what_reverse_writes_for_numbers(pk):
    assert row_url("hosts:snapshot", pk) == reverse("hosts:snapshot", args=[pk])
    assert row_url("hosts:detail", pk) == reverse("hosts:detail", args=[pk])


def test_what_reverse_refuses_it_refuses():
    with pytest.raises(NoReverseMatch):
        row_url("hosts:detail", "a/b")
    with pytest.raises(NoReverseMatch):
        row_url("hosts:snapshot", "abc")


def test_it_escapes_as_the_url_tag_does():
    text = '{% load row_urls %}{% row_url "hosts:detail" name %}|{% url "hosts:detail" name %}'
    mine, django = Template(text).render(Context({"name": "a&b"})).split("|")
    assert mine == django


@override_settings(FORCE_SCRIPT_NAME="/cp/")
def test_it_follows_the_script_prefix():
    set_script_prefix("/cp/")
    try:
        assert row_url("hosts:detail", "gpu-01") == reverse("hosts:detail", args=["gpu-01"])
        assert row_url("hosts:detail", "gpu-01").startswith("/cp/")
    finally:
        set_script_prefix("/")
