"""`python -m controlplane.cli`, the same as the `cpctl` console script."""

from .main import main

# Guarded: importing every product module (as a test of the production image does) must not
# run the client.
if __name__ == "__main__":
    main()
