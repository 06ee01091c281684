"""Simulated 8-GPU inference hosts behind real SSH servers.

The simulator is how tests, benchmarks, the demo and new users meet the product without GPUs:
each host answers the control plane's command lines (hosts/commands.py) with the output the
real tools print, and its state (units, GPU memory, faults) can be read and changed from Python.

A standalone package, not a Django app: it imports nothing from the product (a real host
knows nothing of the control plane). It offers plain data for registration
(`SimFleet.registration_info()`, `CATALOG`); writing that data into the database is the product's
side, in `deployments.simfleet_registration`.
"""

from __future__ import annotations

from .catalog import CATALOG, DEFAULT_UNIT, CatalogModel, unit_file_text
from .server import DEFAULT_STATE_DIR, SimFleet, SimHost, SimHostInfo, host_names
from .state import FAULTS, Machine
from .threaded import FleetHandle, HostHandle, running_fleet

__all__ = [
    "CATALOG",
    "DEFAULT_STATE_DIR",
    "DEFAULT_UNIT",
    "FAULTS",
    "CatalogModel",
    "FleetHandle",
    "HostHandle",
    "Machine",
    "SimFleet",
    "SimHost",
    "SimHostInfo",
    "host_names",
    "running_fleet",
    "unit_file_text",
]
