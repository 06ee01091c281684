"""Evaluating revisions as engineers do: a coherence suite per model, serving benchmarks from
administrators' profiles, and the comparison of a deployment's revisions.

`models` holds the rows (re-exported by deployments.models), `coherence` and `benchmark` what
each run sends and how it is judged, `runs` the job steps that run them, `selectors` the reads
(baselines, the health verdict's evidence) and `comparison` the revision comparison page.
"""
