"""Where a webhook may go: the control plane's own network is refused when an endpoint is saved
and again before every attempt, the attempt connects to the address that was checked, redirects
are not followed, and credentials in a URL are never shown.

DNS answers come from the `dns` fixture (conftest.FakeDNS), standing in for the resolver the rule
calls; every delivery here goes over real sockets to real local servers.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.urls import reverse

from controlplane.audit import services as audit
from controlplane.audit.models import AuditEvent
from controlplane.notifications import destinations, services
from controlplane.notifications.models import WebhookEndpoint
from controlplane.refusals import Refused
from tests import factories as f

from .conftest import PUBLIC_ADDRESS, SECRET, Receiver, queued_messages, running_receiver

pytestmark = pytest.mark.django_db

LOOPBACK_MESSAGE = (
    "127.0.0.1 is a loopback address: webhooks may not reach the control plane's own network "
    "(set WEBHOOK_ALLOWED_NETWORKS to allow it)"
)

# (address, words its refusal must use)
REFUSED_ADDRESSES = [
    ("127.0.0.1", "loopback"),
    ("127.8.9.10", "loopback"),
    ("::1", "loopback"),
    ("169.254.169.254", "metadata"),
    ("169.254.1.1", "link-local"),
    ("fe80::1", "link-local"),
    ("fec0::1", "site-local"),
    ("fd00:ec2::254", "metadata"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("192.168.1.10", "private"),
    ("fd12:3456:789a::1", "private"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("224.0.0.251", "multicast"),
    ("ff02::1", "multicast"),
    ("255.255.255.255", "reserved"),
    ("240.0.0.1", "reserved"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:169.254.169.254", "metadata"),
    ("::ffff:10.0.0.1", "private"),
    ("::ffff:0.0.0.0", "unspecified"),
]

# The issue's own list, as an administrator would type it.
ISSUE_URLS = [
    ("http://127.0.0.1:6379", "loopback"),
    ("http://169.254.169.254/", "metadata"),
    ("http://[::1]/", "loopback"),
    ("http://localhost:22", "loopback"),
    ("http://0.0.0.0:5432", "unspecified"),
]


def literal_url(address: str, port: int | None = None) -> str:
    host = f"[{address}]" if ":" in address else address
    return f"http://{host}{f':{port}' if port else ''}/hook"


def create(admin_user, url: str, name: str = "hook", **kwargs) -> WebhookEndpoint:
    return services.endpoint_create(
        actor=admin_user,
        name=name,
        url=url,
        secret=SECRET,
        event_types=["host.key_changed"],
        **kwargs,
    )


def form(**overrides):
    data = {
        "name": "hook",
        "url": "https://hooks.example.test/in",
        "secret": SECRET,
        "event_types": ["host.key_changed"],
        "active": "on",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def delivery_for(endpoint: WebhookEndpoint):
    host = f.make_host("gpu-01")
    event = audit.record(
        action="host.key_changed", target=host, data={"presented_fingerprint": "x"}
    )
    (delivery,) = services.deliveries_create_for_event(event=event)
    assert delivery.endpoint_id == endpoint.pk
    return delivery


# --- when an endpoint is saved --------------------------------------------------------------------


@pytest.mark.parametrize(("address", "words"), REFUSED_ADDRESSES)
def test_saving_refuses_the_control_planes_own_network_by_address(admin_user, address, words):
    with pytest.raises(Refused) as refused:
        create(admin_user, literal_url(address))
    message = refused.value.message
    assert words in message and "WEBHOOK_ALLOWED_NETWORKS" in message, message
    assert not WebhookEndpoint.objects.exists()


@pytest.mark.parametrize(("address", "words"), REFUSED_ADDRESSES)
def test_saving_refuses_a_name_that_resolves_there(admin_user, dns, address, words):
    dns.answer("innocent.example.test", address)
    with pytest.raises(Refused) as refused:
        create(admin_user, "https://innocent.example.test/hook")
    message = refused.value.message
    assert message.startswith(f"innocent.example.test resolves to {address}"), message
    assert words in message
    assert not WebhookEndpoint.objects.exists()


def test_every_record_of_a_name_is_checked(admin_user, dns):
    dns.answer("mixed.example.test", [PUBLIC_ADDRESS, "10.0.0.7"])
    with pytest.raises(Refused, match=re.escape("10.0.0.7, which is a private address")):
        create(admin_user, "https://mixed.example.test/hook")


@pytest.mark.parametrize(("url", "words"), ISSUE_URLS)
def test_the_form_says_why_an_address_is_refused(client, admin_user, url, words):
    client.force_login(admin_user)
    response = client.post(reverse("notifications:endpoint_create"), form(url=url))
    assert response.status_code == 200
    (error,) = response.context["form"].errors["url"]
    assert words in error and "set WEBHOOK_ALLOWED_NETWORKS to allow it" in error, error
    assert not WebhookEndpoint.objects.exists()


def test_the_loopback_message_in_full(client, admin_user):
    client.force_login(admin_user)
    response = client.post(
        reverse("notifications:endpoint_create"), form(url="http://127.0.0.1:6379")
    )
    assert response.context["form"].errors["url"] == [LOOPBACK_MESSAGE]


@pytest.mark.parametrize(("url", "words"), ISSUE_URLS)
def test_the_admin_refuses_them_too(client, admin_user, url, words):
    client.force_login(admin_user)
    response = client.post(reverse("admin:notifications_webhookendpoint_add"), form(url=url))
    assert response.status_code == 200
    (error,) = response.context["adminform"].form.errors["url"]
    assert words in error
    assert not WebhookEndpoint.objects.exists()


def test_the_control_planes_own_names_and_addresses_are_refused(admin_user, dns, settings):
    settings.ALLOWED_HOSTS = ["controlplane.example.test", ".corp.example.test"]
    dns.answer("controlplane.example.test", "93.184.216.40")
    dns.answer("alias.example.test", "93.184.216.40")
    dns.answer("cp.corp.example.test", "93.184.216.42")
    with pytest.raises(Refused, match="the control plane's own name"):
        create(admin_user, "https://controlplane.example.test/admin/")
    with pytest.raises(Refused, match="the control plane's own name"):
        create(admin_user, "https://cp.corp.example.test/admin/")
    with pytest.raises(Refused, match=re.escape("93.184.216.40, the control plane's own address")):
        create(admin_user, "https://alias.example.test/admin/")
    assert create(admin_user, "https://hooks.example.test/in").pk


def test_the_address_the_request_came_in_on_is_refused(client, admin_user, dns, settings):
    # Any name is accepted here, so ALLOWED_HOSTS cannot say which is the control plane's own.
    settings.ALLOWED_HOSTS = ["*"]
    dns.answer("cp.example.test", "93.184.216.41")
    dns.answer("cp-alias.example.test", "93.184.216.41")
    client.force_login(admin_user)
    url = reverse("notifications:endpoint_create")
    for target, words in (
        ("https://cp.example.test/admin/", "cp.example.test is the control plane's own name"),
        ("https://cp-alias.example.test/", "93.184.216.41, the control plane's own address"),
    ):
        response = client.post(url, form(url=target), HTTP_HOST="cp.example.test")
        assert response.status_code == 200
        (error,) = response.context["form"].errors["url"]
        assert words in error, error
    assert not WebhookEndpoint.objects.exists()


def test_a_name_that_does_not_resolve_is_refused_in_words(client, admin_user, dns):
    dns.answer("gone.example.test", None)
    client.force_login(admin_user)
    response = client.post(
        reverse("notifications:endpoint_create"), form(url="https://gone.example.test/in")
    )
    (error,) = response.context["form"].errors["url"]
    assert error.startswith("gone.example.test does not resolve"), error


def test_an_allowed_network_is_allowed_and_only_that_one(admin_user, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["10.20.0.0/16", "fd00:1234::/32"]
    assert create(admin_user, "http://10.20.3.4:8080/hook", name="a").pk
    assert create(admin_user, "http://[fd00:1234::5]/hook", name="b").pk
    with pytest.raises(Refused, match=re.escape("10.21.0.1 is a private address")):
        create(admin_user, "http://10.21.0.1/hook", name="c")


def test_disabling_an_endpoint_that_now_points_inside_works_enabling_it_does_not(
    client, admin_user, dns
):
    dns.answer("moving.example.test", PUBLIC_ADDRESS)
    endpoint = create(admin_user, "https://moving.example.test/hook")
    dns.answer("moving.example.test", "10.9.8.7")
    client.force_login(admin_user)
    active = reverse("notifications:endpoint_active", args=[endpoint.pk])
    assert client.post(active, {"active": "0"}).status_code == 302
    endpoint.refresh_from_db()
    assert not endpoint.active
    response = client.post(active, {"active": "1"})
    assert response.status_code == 400
    assert b"10.9.8.7, which is a private address" in response.content
    endpoint.refresh_from_db()
    assert not endpoint.active


# --- when it is sent ------------------------------------------------------------------------------


@pytest.mark.parametrize(("address", "words"), REFUSED_ADDRESSES)
def test_a_name_that_moved_inside_after_saving_is_refused_when_sent(
    admin_user, dns, settings, webhook_queue, address, words
):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    dns.answer("hook.moving.test", PUBLIC_ADDRESS)
    endpoint = create(admin_user, "https://hook.moving.test/in")
    delivery = delivery_for(endpoint)
    dns.answer("hook.moving.test", address)
    assert services.delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    # Refused by the rule: failed at once with the reason, not retried.
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == ("failed", 1, None)
    assert delivery.last_error.startswith(f"hook.moving.test resolves to {address}")
    assert words in delivery.last_error
    (attempt,) = delivery.attempt_rows.all()
    assert not attempt.succeeded and attempt.response_code is None
    assert attempt.error == delivery.last_error
    assert queued_messages(webhook_queue) == 0


def test_by_default_loopback_is_refused_when_sent_and_nothing_arrives(
    admin_user, settings, webhook_queue
):
    """An endpoint stored before the rule (or written around it) still never reaches loopback:
    a real receiver listens there and gets nothing."""
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    endpoint = create(admin_user, "https://hooks.example.test/in")
    delivery = delivery_for(endpoint)
    with running_receiver() as receiver:
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(url=receiver.url)
        assert services.delivery_attempt(delivery_id=delivery.pk) == "failed"
        assert receiver.received() == []
    delivery.refresh_from_db()
    assert delivery.last_error == (
        "127.0.0.1 is a loopback address: webhooks may not reach the control plane's own "
        "network (set WEBHOOK_ALLOWED_NETWORKS to allow it)"
    )
    assert queued_messages(webhook_queue) == 0


def test_a_name_that_stops_resolving_is_retried_like_any_network_failure(
    admin_user, dns, webhook_queue
):
    dns.answer("hook.flaky.test", PUBLIC_ADDRESS)
    endpoint = create(admin_user, "https://hook.flaky.test/in")
    delivery = delivery_for(endpoint)
    dns.answer("hook.flaky.test", None)
    assert services.delivery_attempt(delivery_id=delivery.pk) == "retrying"
    delivery.refresh_from_db()
    assert delivery.last_error.startswith("hook.flaky.test does not resolve")
    assert queued_messages(webhook_queue) == 1


@contextlib.contextmanager
def receivers_on_one_port(*hosts: str) -> Iterator[list[Receiver]]:
    """Receivers on several loopback addresses, all on the same port."""
    for _ in range(20):
        with contextlib.ExitStack() as stack:
            first = stack.enter_context(running_receiver(hosts[0]))
            try:
                rest = [stack.enter_context(running_receiver(h, first.port)) for h in hosts[1:]]
            except OSError:
                continue  # that port was taken on another address; try another
            yield [first, *rest]
            return
    raise RuntimeError("no port free on every address")


def test_the_connection_goes_to_the_address_that_was_checked(admin_user, dns, settings):
    """DNS rebinding: the name resolves to an allowed address when checked (127.0.0.2 stands in
    for a public one, allowed by WEBHOOK_ALLOWED_NETWORKS) and to 127.0.0.1 on any later lookup.
    The POST reaches the checked address; the receiver on 127.0.0.1 never hears of it."""
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.2/32"]
    with receivers_on_one_port("127.0.0.2", "127.0.0.1") as (checked, inside):
        url = f"http://hook.rebind.test:{checked.port}/hooks/controlplane"
        dns.answer("hook.rebind.test", "127.0.0.2")
        endpoint = create(admin_user, url)
        delivery = delivery_for(endpoint)
        dns.lookups.clear()
        dns.answer("hook.rebind.test", "127.0.0.2", "127.0.0.1")
        assert services.delivery_attempt(delivery_id=delivery.pk) == "succeeded"
        assert dns.lookups.count("hook.rebind.test") == 1  # checked once, connected to that
        (got,) = checked.received()
        assert got.headers["Host"] == f"hook.rebind.test:{checked.port}"
        assert got.signed_by(SECRET)
        assert inside.received() == []


def test_a_rebinding_name_whose_checked_answer_is_inside_is_never_connected_to(
    admin_user, dns, settings
):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.2/32"]
    with receivers_on_one_port("127.0.0.2", "127.0.0.1") as (allowed, inside):
        url = f"http://hook.rebind.test:{allowed.port}/hooks/controlplane"
        dns.answer("hook.rebind.test", "127.0.0.2")
        delivery = delivery_for(create(admin_user, url))
        # Checked now: 127.0.0.1 (refused); a second lookup would have said 127.0.0.2.
        dns.answer("hook.rebind.test", "127.0.0.1", "127.0.0.2")
        assert services.delivery_attempt(delivery_id=delivery.pk) == "failed"
        assert inside.received() == [] and allowed.received() == []
    delivery.refresh_from_db()
    assert "127.0.0.1, which is a loopback address" in delivery.last_error


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_and_fails_the_delivery(
    admin_user, receiver, webhook_queue, status
):
    with running_receiver() as elsewhere:
        receiver.answer(status)
        receiver.location = f"{elsewhere.url}/stolen"
        delivery = delivery_for(create(admin_user, receiver.url))
        assert services.delivery_attempt(delivery_id=delivery.pk) == "failed"
        assert elsewhere.received() == []
    assert len(receiver.received()) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_response_code) == (
        "failed",
        1,
        status,
    )
    assert "redirects are not followed" in delivery.last_error
    assert f"http://127.0.0.1:{elsewhere.port}/" in delivery.last_error
    assert "stolen" not in delivery.last_error  # the receiver's path may be a credential too
    assert queued_messages(webhook_queue) == 0


# --- TLS to a pinned address ----------------------------------------------------------------------


def _certificate(tmp_path: Path, name: str) -> tuple[Path, ssl.SSLContext]:
    """A CA (its certificate in the file returned) and a server context for `name` signed by it."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webhook test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain = tmp_path / "server.pem"
    chain.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        + leaf.public_bytes(serialization.Encoding.PEM)
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(chain)
    return ca_file, server


@pytest.fixture
def trusted_ca(tmp_path, monkeypatch):
    """Certificates signed by a CA the sender's default trust store includes (SSL_CERT_FILE)."""

    def make(name: str) -> ssl.SSLContext:
        ca_file, server = _certificate(tmp_path, name)
        monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
        return server

    return make


def test_https_to_the_pinned_address_verifies_the_certificate_for_the_name(
    admin_user, dns, settings, trusted_ca
):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with running_receiver(tls=trusted_ca("hook.tls.test")) as tls_receiver:
        dns.answer("hook.tls.test", "127.0.0.1")
        url = f"https://hook.tls.test:{tls_receiver.port}/hooks/controlplane"
        delivery = delivery_for(create(admin_user, url))
        assert services.delivery_attempt(delivery_id=delivery.pk) == "succeeded"
    (got,) = tls_receiver.received()
    assert tls_receiver.sni == ["hook.tls.test"]
    assert got.headers["Host"] == f"hook.tls.test:{tls_receiver.port}"


def test_a_certificate_for_another_name_is_refused(admin_user, dns, settings, trusted_ca):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with running_receiver(tls=trusted_ca("someone-else.test")) as tls_receiver:
        dns.answer("hook.tls.test", "127.0.0.1")
        url = f"https://hook.tls.test:{tls_receiver.port}/hooks/controlplane"
        delivery = delivery_for(create(admin_user, url))
        assert services.delivery_attempt(delivery_id=delivery.pk) == "retrying"
        assert tls_receiver.received() == []
    delivery.refresh_from_db()
    assert "certificate" in delivery.last_error and "hook.tls.test" in delivery.last_error


# --- credentials in a URL -------------------------------------------------------------------------

USER, PASSWORD = "hookuser", "s3cr3t-pa55w0rd"
CREDENTIAL_URL = f"https://{USER}:{PASSWORD}@hooks.example.test/in?channel=ops"


@pytest.fixture
def stored_with_credentials(admin_user) -> WebhookEndpoint:
    """An endpoint whose stored URL carries a user name and password (saved before the rule)."""
    endpoint = create(admin_user, "https://hooks.example.test/in?channel=ops")
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(url=CREDENTIAL_URL)
    endpoint.refresh_from_db()
    return endpoint


def test_a_url_with_credentials_is_refused_with_what_to_do_instead(client, admin_user):
    client.force_login(admin_user)
    response = client.post(reverse("notifications:endpoint_create"), form(url=CREDENTIAL_URL))
    assert response.status_code == 200
    (error,) = response.context["form"].errors["url"]
    assert "user name and password" in error and "secret" in error, error
    body = response.content.decode()
    assert PASSWORD not in body and USER not in body  # not even echoed back into the input
    with pytest.raises(Refused, match="user name and password"):
        create(admin_user, CREDENTIAL_URL)
    assert not WebhookEndpoint.objects.exists()


def test_stored_credentials_are_never_rendered(client, admin_user, stored_with_credentials):
    endpoint = stored_with_credentials
    delivery = delivery_for(endpoint)
    client.force_login(admin_user)
    pages = {
        "list": reverse("notifications:index"),
        "edit form": reverse("notifications:endpoint_edit", args=[endpoint.pk]),
        "delivery": reverse("notifications:delivery", args=[delivery.pk]),
        "admin list": reverse("admin:notifications_webhookendpoint_changelist"),
        "admin form": reverse("admin:notifications_webhookendpoint_change", args=[endpoint.pk]),
    }
    for page, url in pages.items():
        body = client.get(url).content.decode()
        assert PASSWORD not in body and USER not in body, page
    edit = client.get(pages["edit form"]).content.decode()
    assert "https://***@hooks.example.test/in?channel=ops" in edit  # the admin sees it is there
    listed = client.get(pages["list"]).content.decode()
    assert "https://***@hooks.example.test/in?channel=ops" in listed


def test_resubmitting_the_edit_form_unchanged_keeps_the_stored_url_and_says_why(
    client, admin_user, stored_with_credentials
):
    endpoint = stored_with_credentials
    client.force_login(admin_user)
    url = reverse("notifications:endpoint_edit", args=[endpoint.pk])
    page = client.get(url)
    rendered = page.context["form"]["url"].as_widget()
    assert PASSWORD not in rendered
    response = client.post(url, form(url="https://***@hooks.example.test/in?channel=ops"))
    assert response.status_code == 200
    (error,) = response.context["form"].errors["url"]
    assert "user name and password" in error
    endpoint.refresh_from_db()
    assert endpoint.url == CREDENTIAL_URL  # nothing saved, nothing silently dropped
    # Without them, it saves; the audit log never held them.
    response = client.post(url, form(url="https://hooks.example.test/in?channel=ops"))
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.url == "https://hooks.example.test/in?channel=ops"
    audit_text = json.dumps([e.data for e in AuditEvent.objects.all()])
    assert PASSWORD not in audit_text and USER not in audit_text


def test_a_stored_url_with_credentials_is_not_sent_to(admin_user, stored_with_credentials):
    delivery = delivery_for(stored_with_credentials)
    assert services.delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert "user name and password" in delivery.last_error
    assert PASSWORD not in delivery.last_error and USER not in delivery.last_error


def test_the_resolver_answers_every_address_of_a_name(dns):
    """The real resolver (the one the fake stands in for), against the system's own answer for
    localhost: no DNS server needed."""
    expected = {info[4][0] for info in socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)}
    assert set(dns.real("localhost", 80)) == expected
    with pytest.raises(destinations.Unresolvable):
        dns.real("does-not-exist.invalid", 80)
