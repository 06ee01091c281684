"""Parsers for the output of the probe script (hosts/commands.py): text in, dataclasses out.

Remote output is untrusted and often incomplete (an SSH channel can drop mid-line), so every
parser here is strict about what it accepts, and `parse_probe` turns whatever it cannot read
into a `Problem` instead of raising. No I/O, no Django.
"""

from .common import NO_OUTPUT, HttpResult, ParseError, Section
from .envfiles import (
    REDACTED,
    is_secret_key,
    parse_environment_file,
    redact_environment_text,
)
from .http import parse_http, parse_models_json, parse_vllm_metrics
from .integrity import parse_integrity
from .journal import parse_journal
from .nvidia import parse_compute_apps, parse_gpu_csv
from .nvidia_details import (
    clock_event_reason_names,
    parse_gpu_details,
    parse_smi_version,
    parse_topology,
    topology_summary,
)
from .probe import ProbeParse, parse_probe
from .probe_units import named_environment_files
from .processes import parse_process_units
from .sections import split_sections
from .systemd import parse_sha256sum, parse_systemctl_show
from .unit_files import environment_file_names, parse_systemctl_cat, redact_unit_text

__all__ = [
    "NO_OUTPUT",
    "REDACTED",
    "HttpResult",
    "ParseError",
    "ProbeParse",
    "Section",
    "clock_event_reason_names",
    "environment_file_names",
    "is_secret_key",
    "named_environment_files",
    "parse_compute_apps",
    "parse_environment_file",
    "parse_gpu_csv",
    "parse_gpu_details",
    "parse_http",
    "parse_integrity",
    "parse_journal",
    "parse_models_json",
    "parse_probe",
    "parse_process_units",
    "parse_sha256sum",
    "parse_smi_version",
    "parse_systemctl_cat",
    "parse_systemctl_show",
    "parse_topology",
    "parse_vllm_metrics",
    "redact_environment_text",
    "redact_unit_text",
    "split_sections",
    "topology_summary",
]
