"""Signals of the audit log."""

from django.dispatch import Signal

# Sent after the transaction that wrote an event commits (kwargs: event).
event_committed = Signal()
