"""The unit-file domain: reading and rewriting units as they are, revisions, what a unit
serves (its serving plan) and the engine's flags as the engine reads them."""
