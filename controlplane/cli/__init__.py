"""cpctl, the command-line client of the JSON API under /api/v1/.

A thin client: every rule (roles, the two-person rule, freshness, drift, one job per host) is
decided by the server, which answers the CLI exactly as it answers the pages. This package
imports nothing from Django or the apps (an import-linter contract says so), only Click, the
requests library and tabulate, so it can also run on a laptop that only holds a token.
"""
