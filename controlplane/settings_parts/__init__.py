"""Pieces of controlplane/settings.py kept out of it so that it reads as the list of settings.

Nothing here reads the environment: settings.py reads every value (through its one
`environ.Env`) and passes it in. Nothing here writes, creates or connects either.
"""
