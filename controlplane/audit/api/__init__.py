"""The JSON API for the audit log (events and exports), under /api/v1/ (included by
controlplane.api.urls)."""
