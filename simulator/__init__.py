"""Simulated 8-GPU inference hosts behind real SSH servers.

The simulator is how tests, benchmarks, the demo and new users meet the product without GPUs:
each host answers the control plane's command lines (hosts/commands.py) with the output the
real tools print, and its state (units, GPU memory, faults) can be read and changed from Python.

A standalone package, not a Django app: it imports nothing from the product (a real host
knows nothing of the control plane). It offers plain data for registration
(`SimFleet.registration_info()`, `CATALOG`); writing that data into the database is the product's
side, in `deployments.simfleet_registration`.

Serving takes the time it would take. Each host's engines batch their requests and pace their
tokens by a performance model of the model on 8 x RTX PRO 6000 over PCIe (`perf`, `scheduler`,
`serving`): a completion through the host's `curl` answers after its TTFT and every token's
decode step. `time_scale` (on `SimFleet` and `running_fleet`; real seconds per host second,
default 1.0) runs every host's clock faster, e.g. 0.01 for a hundred times: loads, generation,
pip. The wall clock and the SSH transport (the `slow` fault) stay real.

THE SIMULATOR EXECUTES CODE SENT TO IT. `<engine python> [-I] - args...` with a script on stdin
that is not the control plane's integrity check (which stays emulated) runs that script for
real, as the user running the simulator, in a subprocess (`sys.executable -I -`, an empty
temporary directory, a 900 s limit; `tools.scripts`). That is how the product's benchmark client
really measures a simulated server. Before it runs, each argument's loopback URL
(`http://127.0.0.1:PORT...`, `http://localhost:PORT...`) is rewritten to the fleet's own HTTP
server on 127.0.0.1 (a random port, `http.loopback`), with a prefix naming the host and port
meant, e.g. `http://127.0.0.1:45123/sim/gpu-01/8000`; the script itself is not changed and
nothing else confines it. Only a client holding the fleet's client key can send one: keep the
simulator on the loopback (its default bind) and its state directory private.
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
