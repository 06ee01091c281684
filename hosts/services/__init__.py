"""Writes about hosts: registering them, pinning keys, taking snapshots, running commands.

Each rule is a function here; the pages, the API, the command line and the tasks call them.
"""

from .blobs import raw_store
from .freshness import SnapshotNotUsable, snapshot_require_fresh, unknown_facts
from .groups import host_group_join, host_group_leave
from .journal import JournalUnavailable, host_journal
from .locks import hosts_rows_lock
from .maintenance import (
    MAINTENANCE_MAX,
    MaintenanceEntered,
    host_maintenance_enter,
    host_maintenance_leave,
    hosts_maintenance_expire,
    user_may_maintain,
)
from .permissions import (
    PROBE_ROLES,
    HostRefused,
    host_role_require,
    require_probe_permission,
    user_may_accept_host_keys,
    user_may_probe,
)
from .probe_claims import hosts_claim_due_for_probe, hosts_claim_due_ids
from .probe_queue import QueueUnavailable, probe_enqueue
from .probe_recording import snapshot_record, snapshots_record
from .probing import host_probe, host_probe_now, hosts_probe, probe_spec_for, ssh_target_for
from .registry import credential_create, host_create, host_key_accept
from .remote import SUDO_COMMANDS, command_line_for, host_api_key, host_run
from .samples import gpu_samples_backfill, gpu_samples_record

__all__ = [
    "MAINTENANCE_MAX",
    "PROBE_ROLES",
    "SUDO_COMMANDS",
    "HostRefused",
    "JournalUnavailable",
    "MaintenanceEntered",
    "QueueUnavailable",
    "SnapshotNotUsable",
    "command_line_for",
    "credential_create",
    "gpu_samples_backfill",
    "gpu_samples_record",
    "host_api_key",
    "host_create",
    "host_group_join",
    "host_group_leave",
    "host_journal",
    "host_key_accept",
    "host_maintenance_enter",
    "host_maintenance_leave",
    "host_probe",
    "host_probe_now",
    "host_role_require",
    "host_run",
    "hosts_claim_due_for_probe",
    "hosts_claim_due_ids",
    "hosts_maintenance_expire",
    "hosts_probe",
    "hosts_rows_lock",
    "probe_enqueue",
    "probe_spec_for",
    "raw_store",
    "require_probe_permission",
    "snapshot_record",
    "snapshot_require_fresh",
    "snapshots_record",
    "ssh_target_for",
    "unknown_facts",
    "user_may_accept_host_keys",
    "user_may_maintain",
    "user_may_probe",
]
