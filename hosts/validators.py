"""Strict patterns for everything that ends up in a remote command line.

Each is enforced at the model level (so forms, the admin, the API and commands all get it) and
again when a command is built (hosts/commands.py), which quotes every part regardless.
"""

from __future__ import annotations

import ipaddress
import re

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.utils.deconstruct import deconstructible

from controlplane.redaction import looks_secret

HOST_NAME_RE = r"^[a-z0-9](?:[a-z0-9.-]{0,61}[a-z0-9])?$"
ADDRESS_RE = r"^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[?[0-9A-Fa-f:.]+\]?)$"
SSH_USER_RE = r"^[a-z_][a-z0-9_-]{0,31}$"
UNIT_RE = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,200}\.service$"
ABS_PATH_RE = r"^/(?:[A-Za-z0-9._+-]+/)*[A-Za-z0-9._+-]+$"
MODEL_ID_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,99})?$"
# A served model name: what clients send as "model" and /v1/models lists. vLLM's default is the
# model id or path (meta-llama/Llama-3.1-8B-Instruct, /models/x), so any one word the engines
# take, up to the column's length: letters and digits of any script and ASCII punctuation, but
# not a leading "-" (argparse would read a flag), whitespace or control characters (they split
# words and lines), quotes, or the %, $ and backslashes that systemd rewrites in ExecStart=
# even inside quotes.
SERVED_NAME_MAX = 128
SERVED_NAME_RE = rf"^(?!-)[\w!#&()*+,./:;<=>?@\[\]^{{|}}~-]{{1,{SERVED_NAME_MAX}}}$"
DIST_NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
# One engine flag and its optional value, e.g. "--gpu-memory-utilization=0.95" or "--enforce-eager".
ENGINE_ARG_RE = r"^--[a-z0-9][a-z0-9-]{0,63}(?:=[A-Za-z0-9._:,/+-]{1,200})?$"


# Deconstructs as the RegexValidator it refines, so the migrations stay as they are.
@deconstructible(path="django.core.validators.RegexValidator")
class WholeMatchValidator(RegexValidator):
    """A RegexValidator that must match the whole value. Django's searches, where `$` also
    matches before a trailing newline: "vllm.service\n" passed the model and then failed every
    command built from it (the builders use re.fullmatch), or broke a unit file's line."""

    def __call__(self, value: object) -> None:
        if not re.fullmatch(self.regex, str(value)):
            raise ValidationError(self.message, code=self.code, params={"value": value})


validate_host_name = WholeMatchValidator(
    HOST_NAME_RE, "Use lower-case letters, digits, dots and dashes (e.g. gpu-01)."
)
validate_address = WholeMatchValidator(ADDRESS_RE, "Enter a host name or an IP address.")
validate_ssh_user = WholeMatchValidator(SSH_USER_RE, "Enter a POSIX user name (e.g. root, deploy).")
validate_unit_name = WholeMatchValidator(
    UNIT_RE, "Enter a systemd service unit such as vllm-kimi-k25.service."
)
validate_abs_path = WholeMatchValidator(
    ABS_PATH_RE, "Enter an absolute path of letters, digits and . _ + - only."
)
validate_model_id = WholeMatchValidator(
    MODEL_ID_RE, "Enter a model identifier such as moonshotai/Kimi-K2.5."
)
validate_served_name = WholeMatchValidator(
    SERVED_NAME_RE,
    f"Enter a served model name such as meta-llama/Llama-3.1-8B-Instruct: one word of up to "
    f"{SERVED_NAME_MAX} characters, not starting with -, without spaces, control characters, "
    "quotes or %% $ \\ (systemd rewrites those in a unit's command line).",  # %% is one %
)


def validate_model_location(value: object) -> None:
    """A model as the engines take it: an absolute path on the host, or a repository id."""
    if not isinstance(value, str) or not (
        re.fullmatch(ABS_PATH_RE, value) or re.fullmatch(MODEL_ID_RE, value)
    ):
        raise ValidationError(
            "Enter an absolute path (/models/moonshotai/Kimi-K2.5-INT4) or a repository id "
            "(nvidia/Kimi-K2.5-NVFP4)."
        )


validate_dist_name = WholeMatchValidator(
    DIST_NAME_RE, "Enter a Python distribution name such as vllm."
)
_engine_arg = re.compile(ENGINE_ARG_RE)
_flag_name = re.compile(r"--[a-z0-9][a-z0-9_-]{0,63}")


def validate_engine_args(value: object) -> None:
    """A list of flags, each --name or --name=value from a safe alphabet. The message names the
    argument by its flag and never echoes its value (it may be a secret someone pasted)."""
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise ValidationError("Engine arguments must be a list of strings.")
    for number, arg in enumerate(value, 1):
        if not _engine_arg.fullmatch(arg):
            flag = arg.partition("=")[0]
            named = f" ({flag})" if _flag_name.fullmatch(flag) and not looks_secret(flag) else ""
            raise ValidationError(
                f"Engine argument {number}{named} is not allowed: use --flag or --flag=value "
                "(letters, digits and . _ : , / + - in the value)."
            )


def validate_labels(value: object) -> None:
    if not isinstance(value, dict):
        raise ValidationError("Labels must be a mapping of names to values.")
    for key, val in value.items():
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,62}", str(key)) or not isinstance(val, str):
            raise ValidationError(f"Label {key!r} must be a lower-case name with a string value.")
        if len(val) > 200:
            raise ValidationError(f"Label {key!r} is longer than 200 characters.")


def plain_ip_address(value: object) -> bool:
    """An IPv4 or IPv6 address with no IPv6 scope id: "fe80::1%eth0" is an address to Python,
    but its "%..." reaches a unit's ExecStart=, where systemd expands % and ${...}."""
    try:
        ipaddress.ip_address(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return "%" not in str(value)


def validate_bind_address(value: object) -> None:
    if not plain_ip_address(value):
        raise ValidationError(
            "Enter an IPv4 or IPv6 address without a scope id (e.g. 127.0.0.1, 0.0.0.0, ::1)."
        )
