"""The JSON API for deployments, the model catalog and change requests (with their decisions),
under /api/v1/ (included by controlplane.api.urls)."""
