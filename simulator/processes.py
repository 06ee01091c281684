"""What runs on a simulated host besides the inference servers, as `ps -e -o pid=,unit=` sees it.

A booted Ubuntu 24.04 GPU server trimmed to a realistic handful: PID 1, kernel threads (in no
unit, so ps prints `-`), the system services and NVIDIA's daemons. PIDs are those of a typical
boot, all below the range the simulator gives to processes started later. Names are as
/proc/PID/comm holds them: the kernel keeps 15 characters, so longer names arrive cut.
"""

from __future__ import annotations

from dataclasses import dataclass

COMM_MAX = 15  # TASK_COMM_LEN - 1
PID_WIDTH = 7  # procps pads PID to the digits of kernel.pid_max (4194304 on Ubuntu 24.04)
UNIT_WIDTH = 31  # procps's width for the unit column when it is not the last one
COMM_WIDTH = 15

# The other user whose processes the `foreign_gpu_process` fault puts on the GPUs.
FOREIGN_USER = "alice"
FOREIGN_UID = 1001
FOREIGN_SESSION = 7
FOREIGN_COMM = "python3"
FOREIGN_MIB = 4096


@dataclass(frozen=True)
class Process:
    pid: int
    comm: str
    unit: str | None  # None: in no unit or scope (kernel threads); ps prints "-"


def comm(title: str) -> str:
    """What /proc/PID/comm holds for a process that named itself `title` (prctl PR_SET_NAME)."""
    return title[:COMM_MAX]


SYSTEM: tuple[Process, ...] = (
    Process(1, "systemd", "init.scope"),
    Process(2, "kthreadd", None),
    Process(3, "pool_workqueue_", None),
    Process(4, "kworker/R-rcu_g", None),
    Process(5, "kworker/R-rcu_p", None),
    Process(6, "kworker/R-slub_", None),
    Process(7, "kworker/R-netns", None),
    Process(12, "kworker/R-mm_pe", None),
    Process(13, "rcu_tasks_kthre", None),
    Process(14, "rcu_tasks_rude_", None),
    Process(15, "rcu_tasks_trace", None),
    Process(16, "ksoftirqd/0", None),
    Process(17, "rcu_preempt", None),
    Process(18, "migration/0", None),
    Process(19, "idle_inject/0", None),
    Process(20, "cpuhp/0", None),
    Process(21, "cpuhp/1", None),
    Process(22, "idle_inject/1", None),
    Process(23, "migration/1", None),
    Process(24, "ksoftirqd/1", None),
    Process(211, "kswapd0", None),
    Process(618, "nvidia-modeset/", None),
    Process(619, "nv_queue", None),
    Process(642, "irq/187-nvidia", None),
    Process(788, "systemd-journal", "systemd-journald.service"),
    Process(845, "multipathd", "multipathd.service"),
    Process(861, "systemd-udevd", "systemd-udevd.service"),
    Process(1402, "systemd-network", "systemd-networkd.service"),
    Process(1405, "systemd-resolve", "systemd-resolved.service"),
    Process(1407, "systemd-timesyn", "systemd-timesyncd.service"),
    Process(1498, "cron", "cron.service"),
    Process(1499, "dbus-daemon", "dbus.service"),
    Process(1511, "nvidia-persiste", "nvidia-persistenced.service"),
    Process(1513, "rsyslogd", "rsyslog.service"),
    Process(1515, "systemd-logind", "systemd-logind.service"),
    Process(1524, "polkitd", "polkit.service"),
    Process(1560, "nv-hostengine", "nvidia-dcgm.service"),
    Process(1587, "agetty", "getty@tty1.service"),
    Process(1589, "agetty", "serial-getty@ttyS0.service"),
    Process(1601, "unattended-upgr", "unattended-upgrades.service"),
    Process(1633, "sshd", "ssh.service"),
)

FIRST_FREE_PID = 1700  # everything later gets a PID above this


def uid_of(user: str) -> int:
    return 0 if user == "root" else (FOREIGN_UID if user == FOREIGN_USER else 1000)


@dataclass(frozen=True)
class Login:
    """One SSH login: logind's session scope with sshd's two processes and the shell."""

    session: int
    user: str
    sshd_priv_pid: int  # "sshd: USER [priv]", the monitor PAM put in the session
    sshd_pid: int  # "sshd: USER@notty", the unprivileged child
    shell_pid: int

    @property
    def scope(self) -> str:
        return f"session-{self.session}.scope"

    def processes(self) -> list[Process]:
        return [
            Process(self.sshd_priv_pid, "sshd", self.scope),
            Process(self.sshd_pid, "sshd", self.scope),
            Process(self.shell_pid, "bash", self.scope),
        ]


def user_manager(uid: int, pids: tuple[int, int]) -> list[Process]:
    """`systemd --user` and its `(sd-pam)` helper, started at a user's first login."""
    unit = f"user@{uid}.service"
    return [Process(pids[0], "systemd", unit), Process(pids[1], "(sd-pam)", unit)]
