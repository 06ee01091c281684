"""Signals other apps listen to without hosts importing them."""

from django.dispatch import Signal

# Sent inside the transaction that stores snapshots (kwargs: snapshots, a list), so listeners'
# writes and audit events commit or roll back with them.
snapshots_recorded = Signal()
