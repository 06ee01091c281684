"""Parsers for the output of the probe script (hosts/commands.py): text in, dataclasses out.

Remote output is untrusted and often incomplete (an SSH channel can drop mid-line), so every
parser here is strict about what it accepts, and `parse_probe` turns whatever it cannot read
into a `Problem` instead of raising. No I/O, no Django.
"""

from .common import NO_OUTPUT, HttpResult, ParseError, Section
from .http import parse_http, parse_models_json, parse_vllm_metrics
from .integrity import parse_integrity
from .nvidia import parse_compute_apps, parse_gpu_csv
from .probe import ProbeParse, parse_probe
from .processes import parse_process_units
from .sections import split_sections
from .systemd import parse_sha256sum, parse_systemctl_show

__all__ = [
    "NO_OUTPUT",
    "HttpResult",
    "ParseError",
    "ProbeParse",
    "Section",
    "parse_compute_apps",
    "parse_gpu_csv",
    "parse_http",
    "parse_integrity",
    "parse_models_json",
    "parse_probe",
    "parse_process_units",
    "parse_sha256sum",
    "parse_systemctl_show",
    "parse_vllm_metrics",
    "split_sections",
]
