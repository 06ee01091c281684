"""Signals other apps listen to without hosts importing them."""

from django.dispatch import Signal

# Sent inside the transaction that stores a snapshot (kwargs: snapshot), so listeners' writes
# and audit events commit or roll back with it.
snapshot_recorded = Signal()
