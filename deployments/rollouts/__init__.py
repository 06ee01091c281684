"""Rollouts: one change across a host group or a selection of hosts, in waves.

`models` holds the rows (re-exported by deployments.models), `choices` their statuses,
`lifecycle` the one place their statuses are written, `waves` how hosts are put in waves,
`services` the decisions people make (request, approve, reject, pause, resume, abort),
`turns` a host's turn (probe, check it still matches what was approved, request its change
through the existing path), `gates` whether a finished change passed, `orchestrator` what a
worker does each time it looks at a rollout, `selectors` the reads for the pages and the API.
"""
