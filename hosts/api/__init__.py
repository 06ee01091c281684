"""The JSON API for hosts and their snapshots (probe now included), under /api/v1/ (included by
controlplane.api.urls)."""
