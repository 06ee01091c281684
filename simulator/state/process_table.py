"""The host's process table: where PIDs come from, SSH logins, and what `ps -e` lists.

Also the `foreign_gpu_process` fault's processes: someone else's login with one python3 per GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import processes
from ..processes import Login, Process
from .gpus import ForeignProcess, GpuSpec, runs_usage
from .units import run_binary

if TYPE_CHECKING:
    from .machine import Machine


def take_pids(machine: Machine, count: int) -> list[int]:
    """Consecutive PIDs for processes started together (a login, a process and its children)."""
    first = machine.next_pid + 1
    machine.next_pid += count
    return list(range(first, first + count))


def _user_manager(machine: Machine, user: str) -> None:
    """`systemd --user` starts at a user's first login and stays."""
    uid = processes.uid_of(user)
    if uid not in machine.user_managers:
        a, b = take_pids(machine, 2)
        machine.user_managers[uid] = (a, b)


def new_login(machine: Machine, user: str) -> Login:
    """An SSH login: logind gives it the next session number, sshd and the shell PIDs."""
    _user_manager(machine, user)
    priv, child, shell = take_pids(machine, 3)
    machine.next_session += 1
    return Login(machine.next_session, user, priv, child, shell)


def listing(machine: Machine, login: Login | None, own_pid: int | None) -> list[Process]:
    """What `ps -e` lists, by PID: the system, each unit's process tree, the logins.

    `login` is the session asking (with `own_pid`, the ps process itself).
    """
    procs = {p.pid: p for p in processes.SYSTEM}
    for uid, pids in machine.user_managers.items():
        procs.update((p.pid, p) for p in processes.user_manager(uid, pids))
    for unit in machine.units.values():
        if unit.run is not None:
            procs.update((p.pid, p) for p in unit.run.processes(unit.name, run_binary(unit)))
    logins = [x for x in (machine.foreign_login, login) if x is not None]
    for x in logins:
        procs.update((p.pid, p) for p in x.processes())
    if machine.foreign_login is not None:
        scope = machine.foreign_login.scope
        procs.update((p.pid, Process(p.pid, p.comm, scope)) for p in machine.foreign_procs)
    if login is not None and own_pid is not None:
        procs[own_pid] = Process(own_pid, "ps", login.scope)
    return sorted(procs.values(), key=lambda p: p.pid)


def start_foreign(machine: Machine) -> None:
    """Someone logged in and started one python3 per GPU, each taking 4 GiB if it fits."""
    if machine.foreign_procs:
        return  # already running: the same PIDs for as long as the fault stays on
    now = machine.tick()
    _user_manager(machine, processes.FOREIGN_USER)
    priv, child, shell = take_pids(machine, 3)
    machine.foreign_login = Login(
        processes.FOREIGN_SESSION, processes.FOREIGN_USER, priv, child, shell
    )
    pids = take_pids(machine, machine.hardware.gpu_count)
    for pid, spec in zip(pids, machine.gpus, strict=True):
        machine.foreign_procs.append(ForeignProcess(pid, spec.index, _room(machine, spec, now)))


def _room(machine: Machine, spec: GpuSpec, now: float) -> int:
    """What a foreign process manages to allocate now: its wish, or what is left."""
    room = spec.memory_mib - spec.idle_mib - runs_usage(machine, spec, now)
    return max(0, min(machine.foreign_mib, room))


def set_foreign_memory(machine: Machine, mib: int) -> None:
    """How much each foreign process holds (4096 MiB unless a test wants it tighter).

    Running ones are replaced by the same PIDs holding the new amount, as far as it fits.
    """
    machine.foreign_mib = max(0, int(mib))
    now = machine.tick()
    machine.foreign_procs = [
        ForeignProcess(p.pid, p.gpu, _room(machine, machine.gpus[p.gpu], now), p.comm)
        for p in machine.foreign_procs
    ]


def stop_foreign(machine: Machine) -> None:
    machine.foreign_procs = []
    machine.foreign_login = None
    machine.user_managers.pop(processes.FOREIGN_UID, None)
