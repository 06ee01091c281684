"""The change job engine: the runner and its parts (the job, its plan and steps, the host lease,
the shell that runs commands on the host, verification, drift, repair, outcomes)."""
