"""Where a webhook may be sent: the one rule, applied when an endpoint is saved and again before
every attempt.

A webhook is a signed POST the control plane makes on an administrator's say-so, from inside
its own network. Pointed at Redis on 127.0.0.1, the cloud's metadata service, a database on a
private address or the control plane's own admin, it would be a request forgery with the
control plane's signature on it. So the URL's host is resolved (every A and AAAA record) and
each address must be public (`ipaddress`: not loopback, link-local, private, unspecified,
multicast or reserved, in any IPv4-mapped, 6to4 or NAT64 spelling, and not shared carrier-grade
NAT space) and not the control plane's own, unless `WEBHOOK_ALLOWED_NETWORKS` names a network
that holds it. The answer that was checked is the one the sender connects to
(`Destination.addresses`): the name is not looked up again, so it cannot be re-pointed
(rebound) between the check and the connection.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest
from django.http.request import split_domain_port, validate_host

from controlplane.refusals import Refused

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# The ranges `ipaddress` has no property for. Shared address space between a carrier's NAT and
# its customers (RFC 6598) is neither private nor global there; NAT64's well-known prefix
# (RFC 6052) carries an IPv4 address in its last 32 bits, and so does 6to4 (`sixtofour`).
SHARED_ADDRESS_SPACE = ipaddress.IPv4Network("100.64.0.0/10")
NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")
# Instance metadata services (credentials live there): refused anyway as link-local, private or
# shared addresses, and named as what they are.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200")
)

ALLOW_HINT = "set WEBHOOK_ALLOWED_NETWORKS to allow it"
CREDENTIALS_MESSAGE = (
    "Remove the user name and password from the URL: a webhook URL may not carry credentials, "
    "which would show wherever the URL is shown. A receiver knows the control plane by the "
    "signature on every body (X-Controlplane-Signature, made with the endpoint's secret)."
)
REDACTED_USERINFO = "***"


class Unresolvable(Exception):
    """The name has no address now (no such name, no A or AAAA record, or DNS did not answer)."""


class DestinationRefused(Refused):
    """A webhook may not go to this URL. `permanent` is False when only DNS failed: asking
    again later may succeed, as with any network failure."""

    def __init__(self, message: str, *, permanent: bool = True) -> None:
        super().__init__(message, code="invalid")
        self.permanent = permanent


@dataclass(frozen=True)
class Destination:
    """A URL checked for sending: connect only to `addresses`, and speak to `host` (the Host
    header, TLS server name and certificate) as the URL names it."""

    scheme: str
    host: str  # ASCII (IDNA) and without brackets
    port: int
    addresses: tuple[str, ...]


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` has now (A and AAAA), in the resolver's order, each once."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise Unresolvable(reason) from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# --- addresses ------------------------------------------------------------------------------------


def _embedded_ipv4(address: Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """An IPv6 spelling of an IPv4 address (and its name), which reaches that IPv4 address."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return "an IPv4-mapped form of", address.ipv4_mapped
    if address.sixtofour is not None:
        return "a 6to4 form of", address.sixtofour
    if address in NAT64_PREFIX:
        return "a NAT64 form of", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_refusal(address: Address) -> str | None:
    """What `address` is, in words, when the built-in rule refuses it; None for a public one."""
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        form, inner = embedded
        why = address_refusal(inner)
        return f"{form} {inner}, {why}" if why else None
    checks = (
        (address.is_loopback, "a loopback address"),
        (address.is_unspecified, "the unspecified address"),
        (address in METADATA_ADDRESSES, "the cloud metadata service's address"),
        (address.is_link_local, "a link-local address"),
        # Deprecated IPv6 site-local space (fec0::/10), which 3.11 counts as global.
        (getattr(address, "is_site_local", False), "a site-local address"),
        (address.is_multicast, "a multicast address"),
        (address in SHARED_ADDRESS_SPACE, "a shared (carrier-grade NAT) address"),
        (address.is_reserved, "a reserved or broadcast address"),
        (address.is_private, "a private address"),
        (not address.is_global, "not a public address"),
    )
    return next((words for refused, words in checks if refused), None)


def allowed_networks() -> list[Network]:
    """WEBHOOK_ALLOWED_NETWORKS, parsed (settings already refused a malformed one)."""
    return [ipaddress.ip_network(n, strict=False) for n in settings.WEBHOOK_ALLOWED_NETWORKS]


def _allowed(address: Address, networks: list[Network]) -> bool:
    embedded = _embedded_ipv4(address)
    candidates = [address, embedded[1]] if embedded else [address]
    return any(c in n for c in candidates for n in networks if c.version == n.version)


def _parse(address: str) -> Address:
    return ipaddress.ip_address(address.split("%", 1)[0])  # a link-local zone id is not needed


def _same(a: Address, b: Address) -> bool:
    return (_embedded_ipv4(a) or ("", a))[1] == (_embedded_ipv4(b) or ("", b))[1]


# --- the control plane's own names ----------------------------------------------------------------


def request_hosts(request: HttpRequest) -> tuple[str, ...]:
    """The names the control plane was reached by in this request (the Host it was asked for,
    the server's own name): a webhook may not point back at them."""
    names = []
    with contextlib.suppress(DisallowedHost):  # answered by the middleware already
        names.append(request.get_host())
    names.append(request.META.get("SERVER_NAME", ""))
    hosts = (split_domain_port(n)[0] for n in names if n)
    return tuple(dict.fromkeys(h for h in hosts if h))


def _own_names(own_hosts: Iterable[str]) -> list[str]:
    names = [str(n).lower() for n in settings.ALLOWED_HOSTS if n and n != "*"]
    names += [str(n).lower() for n in own_hosts if n]
    base = urlsplit(settings.CONTROLPLANE_BASE_URL or "").hostname
    if base:
        names.append(base.lower())
    return list(dict.fromkeys(names))


def _is_own_name(host: str, names: list[str]) -> bool:
    patterns = [f"[{n}]" if ":" in n and not n.startswith("[") else n for n in names]
    return validate_host(f"[{host}]" if ":" in host else host, patterns)


def _own_addresses(names: list[str]) -> dict[Address, str]:
    """Addresses of the control plane's own names (best effort: a name that does not resolve
    adds none), each with the name it came from."""
    found: dict[Address, str] = {}
    for name in names:
        if name.startswith("."):  # a pattern for subdomains, not a name
            continue
        bare = name.strip("[]").rstrip(".")
        try:
            found.setdefault(ipaddress.ip_address(bare), name)
            continue
        except ValueError:
            pass
        try:
            for answer in resolve(bare, 443):
                found.setdefault(_parse(answer), name)
        except (Unresolvable, ValueError):
            continue
    return found


# --- the rule -------------------------------------------------------------------------------------


def url_without_credentials(url: str) -> str:
    """`url` with any user name and password replaced by `***`: how a URL is shown."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host_port = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{REDACTED_USERINFO}@{host_port}"))


def _refuse(host: str, literal: bool, address: str, what: str, consequence: str) -> NoReturn:
    subject = f"{address} is" if literal else f"{host} resolves to {address}, which is"
    raise DestinationRefused(f"{subject} {what}: {consequence} ({ALLOW_HINT})")


def destination_check(url: str, *, own_hosts: Iterable[str] = ()) -> Destination:
    """Where a POST to `url` may connect, or DestinationRefused saying why not (in words an
    administrator can act on).

    `own_hosts` adds names the control plane is reached by (the request's host) to those it
    knows from settings (ALLOWED_HOSTS, CONTROLPLANE_BASE_URL). An address inside
    WEBHOOK_ALLOWED_NETWORKS is allowed whatever else it is: that is the administrator's word.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise DestinationRefused("Only http and https URLs.")
    if "@" in parts.netloc:
        raise DestinationRefused(CREDENTIALS_MESSAGE)
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise DestinationRefused("The URL's port is not a number from 1 to 65535.") from None
    raw_host = (parts.hostname or "").rstrip(".")
    if not raw_host:
        raise DestinationRefused("The URL names no host.")
    try:
        host = raw_host.encode("idna").decode("ascii") if not raw_host.isascii() else raw_host
    except UnicodeError:
        raise DestinationRefused(f"{raw_host} is not a valid host name.") from None
    literal = _is_literal(host)
    try:
        answers = resolve(host, port)
    except Unresolvable as exc:
        raise DestinationRefused(
            f"{host} does not resolve ({exc}): check the name, or try again if DNS is down.",
            permanent=False,
        ) from None
    # The resolver's own spelling goes into messages (3.11 prints ::ffff:127.0.0.1 as
    # ::ffff:7f00:1).
    pairs = [(answer, _parse(answer)) for answer in answers]
    if not pairs:
        raise DestinationRefused(f"{host} does not resolve (no address).", permanent=False)
    networks = allowed_networks()
    destination = Destination(scheme=scheme, host=host, port=port, addresses=tuple(answers))
    if all(_allowed(a, networks) for _, a in pairs):
        return destination
    refused = [(shown, a) for shown, a in pairs if not _allowed(a, networks)]
    inside = "webhooks may not reach the control plane's own network"
    for shown, address in refused:
        what = address_refusal(address)
        if what:
            _refuse(host, literal, shown, what, inside)
    names = _own_names(own_hosts)
    itself = "webhooks may not reach the control plane itself"
    if _is_own_name(host, names):
        raise DestinationRefused(
            f"{host} is the control plane's own name: {itself} "
            "(set WEBHOOK_ALLOWED_NETWORKS to allow its addresses)"
        )
    own = _own_addresses(names)
    for shown, address in refused:
        name = next((n for a, n in own.items() if _same(a, address)), None)
        if name is not None:
            subject = shown if literal else f"{host} resolves to {shown}"
            raise DestinationRefused(
                f"{subject}, the control plane's own address (as {name}): {itself} ({ALLOW_HINT})"
            )
    return destination


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def check_needed(*, url: str, active: bool, previous_url: str | None) -> bool:
    """Whether saving an endpoint checks its URL: always, except when a disabled endpoint keeps
    the URL it had, so that disabling one that now points somewhere refused always works."""
    return active or previous_url is None or url != previous_url
