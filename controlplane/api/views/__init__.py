"""The API's own views: the root, the shared base class and the token page. Each app's views
live beside it (hosts.api, deployments.api, controlplane.audit.api)."""
