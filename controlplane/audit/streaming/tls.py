"""The TLS client side of the stream (syslog per RFC 5425, and https): TLS 1.2 or later, the
server's certificate verified against `ca_file` (or the system's trust store) for the name the
destination gives, and a client certificate when one is configured."""

from __future__ import annotations

import ssl

from controlplane.settings_parts.audit_streams import StreamDestination

from .errors import StreamSendError


def client_context(destination: StreamDestination) -> ssl.SSLContext:
    """A fresh context per send: a renewed CA or client certificate on disk is read at the next
    send, without restarting workers."""
    try:
        context = ssl.create_default_context(cafile=destination.ca_file or None)
    except FileNotFoundError:
        raise StreamSendError(f"ca_file {destination.ca_file}: no such file") from None
    except (OSError, ssl.SSLError) as exc:
        raise StreamSendError(
            f"ca_file {destination.ca_file}: not a readable PEM certificate ({_why(exc)})"
        ) from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if destination.cert_file:
        try:
            # An empty password, never OpenSSL's prompt: a worker has no terminal to ask on.
            context.load_cert_chain(destination.cert_file, destination.key_file, password="")
        except (OSError, ssl.SSLError) as exc:
            # The message names the files, never their contents.
            raise StreamSendError(
                f"cert_file {destination.cert_file} / key_file {destination.key_file}: "
                f"not a readable certificate and matching unencrypted key ({_why(exc)})"
            ) from None
    return context


def _why(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason or exc.__class__.__name__)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return exc.__class__.__name__
