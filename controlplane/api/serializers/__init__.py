"""What the API reads and writes, one module per resource. Nothing here exposes a credential's
key or any other secret: hosts show their credential's name and key fingerprints only."""
