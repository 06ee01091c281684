"""`python -m controlplane.cli`, the same as the `cpctl` console script."""

from .main import main

main()
