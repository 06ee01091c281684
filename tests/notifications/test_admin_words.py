"""The admin names its lists as English does: "webhook deliveries", not "webhook deliverys"."""

from __future__ import annotations

from django.apps import apps


def test_no_model_is_called_something_ys() -> None:
    plurals = {str(m._meta.verbose_name_plural) for m in apps.get_models()}
    assert "webhook deliveries" in plurals and "identities" in plurals
    assert not [p for p in plurals if p.endswith("ys") and not p.endswith(("days", "keys"))]
