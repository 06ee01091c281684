"""The JSON API's views, one module per resource, and the token page. Views parse the request,
call one service or selector, and render; refusals become statuses in controlplane.api.errors."""
