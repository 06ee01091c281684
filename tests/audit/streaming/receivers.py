"""Real receivers for the audit stream's tests: Debian's rsyslogd (`make rsyslog` installs it),
started in the foreground with a configuration of its own, and a local HTTP collector; and the
certificates they present, made here with `cryptography`.

rsyslogd runs with `-n` (no daemon), unprivileged (as `nobody` when the tests run as root, with
a folder of its own that it owns), its own work directory, pid file and config, imtcp on
127.0.0.1 (a free port on first start, the same port on each restart) and, for TLS, its GnuTLS
driver (`rsyslog-gnutls`'s lmnsd_gtls). No imuxsock, no imklog: it touches nothing of the
machine's own syslog. What it receives goes, one JSON object per message, to a file the test
reads: RFC 5424's fields as rsyslog parsed them (PRI, HOSTNAME, APP-NAME, MSGID, STRUCTURED-DATA,
MSG). Its ruleset has a Direct queue, so a message is in that file before rsyslog reads the
next bytes: what the stream counts as taken (rsyslog read it) is then also written.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

RSYSLOGD = shutil.which("rsyslogd") or "/usr/sbin/rsyslogd"
SD_PARAM = re.compile(r'(\S+?)="((?:[^"\\]|\\.)*)"')


# --- certificates ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    """A CA, a server certificate for localhost and 127.0.0.1, and a client certificate."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    return path


def _issue(
    subject: str,
    ca_key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    *,
    is_ca: bool = False,
    sans: list[x509.GeneralName] | None = None,
    key: ec.EllipticCurvePrivateKey | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = key or ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if is_ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        )
    else:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage(
                [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH, x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_pki(folder: Path, label: str = "test") -> Pki:
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert, _ = _issue(f"{label} audit stream CA", ca_key, _name(f"{label} audit stream CA"),
                        is_ca=True, key=ca_key)  # fmt: skip
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    server_cert, server_key = _issue("localhost", ca_key, ca_cert.subject, sans=sans)
    client_cert, client_key = _issue("controlplane", ca_key, ca_cert.subject,
                                     sans=[x509.DNSName("controlplane")])  # fmt: skip
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca_cert.public_bytes(pem))
    (folder / "server.pem").write_bytes(server_cert.public_bytes(pem))
    (folder / "client.pem").write_bytes(client_cert.public_bytes(pem))
    return Pki(
        ca=folder / "ca.pem",
        server_cert=folder / "server.pem",
        server_key=_write_key(server_key, folder / "server.key"),
        client_cert=folder / "client.pem",
        client_key=_write_key(client_key, folder / "client.key"),
    )


# --- running a receiver unprivileged ------------------------------------------------------------


def unprivileged() -> list[str]:
    """The argv prefix that runs a receiver as `nobody` when the tests run as root (as in CI
    containers); nothing otherwise. A receiver needs no privilege: a high port, its own files."""
    if os.geteuid() != 0:
        return []
    nobody = pwd.getpwnam("nobody")
    return ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]


def receiver_folder(prefix: str) -> Path:
    """A folder the receiver owns (pytest's own are private to the user running the tests)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    _give(folder)
    return folder


def hand_over(folder: Path, *files: Path) -> list[Path]:
    """Copies of `files` in the receiver's folder, readable by it alone."""
    copies = []
    for source in files:
        copy = folder / source.name
        shutil.copyfile(source, copy)
        copy.chmod(0o600)
        _give(copy)
        copies.append(copy)
    return copies


def _give(path: Path) -> None:
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(path, nobody.pw_uid, nobody.pw_gid)


# --- rsyslogd ----------------------------------------------------------------------------------

TEMPLATE = """
template(name="received" type="list" option.jsonf="on") {
  property(outname="pri" name="pri" format="jsonf")
  property(outname="hostname" name="hostname" format="jsonf")
  property(outname="app" name="app-name" format="jsonf")
  property(outname="procid" name="procid" format="jsonf")
  property(outname="msgid" name="msgid" format="jsonf")
  property(outname="sd" name="structured-data" format="jsonf")
  property(outname="timestamp" name="timereported" dateFormat="rfc3339" format="jsonf")
  property(outname="msg" name="msg" format="jsonf")
}
"""


@dataclass
class Received:
    """One message as rsyslog parsed it, with the stream's record from its MSG."""

    pri: int
    hostname: str
    app: str
    procid: str
    msgid: str
    sd: str
    timestamp: str
    record: dict[str, Any]
    params: dict[str, str] = field(default_factory=dict)

    @property
    def seq(self) -> int:
        return int(self.record["seq"])


class Rsyslog:
    """A real rsyslogd receiving syslog over TCP (or TLS) on 127.0.0.1."""

    def __init__(self, *, pki: Pki | None = None, client_auth: bool = False) -> None:
        self.folder = receiver_folder("audit-rsyslog-")
        self.pki = pki
        self.server_files: list[Path] = []
        if pki is not None:
            self.server_files = hand_over(self.folder, pki.ca, pki.server_cert, pki.server_key)
        self.client_auth = client_auth
        self.output = self.folder / "received.jsonl"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def _config(self) -> str:
        tls = ""
        driver = ""
        if self.server_files:
            ca, cert, key = self.server_files
            tls = (
                f' DefaultNetstreamDriverCAFile="{ca}"'
                f' DefaultNetstreamDriverCertFile="{cert}"'
                f' DefaultNetstreamDriverKeyFile="{key}"'
            )
            mode = "x509/certvalid" if self.client_auth else "anon"
            driver = (
                f' StreamDriver.Name="gtls" StreamDriver.Mode="1" StreamDriver.AuthMode="{mode}"'
            )
        port = (
            f'port="{self.port}"'
            if self.port
            else f'port="0" listenPortFileName="{self.folder / "port"}"'
        )
        return (
            f'global(workDirectory="{self.folder}" maxMessageSize="256k"{tls})\n'
            f'module(load="imtcp"{driver})\n'
            f"{TEMPLATE}\n"
            'ruleset(name="audit" queue.type="Direct") {\n'
            f'  action(type="omfile" file="{self.output}" template="received")\n'
            "}\n"
            f'input(type="imtcp" address="127.0.0.1" {port} ruleset="audit")\n'
        )

    def start(self, timeout: float = 15) -> Rsyslog:
        conf = self.folder / "rsyslog.conf"
        conf.write_text(self._config())
        (self.folder / "port").unlink(missing_ok=True)
        log = (self.folder / "rsyslogd.log").open("ab")
        self.proc = subprocess.Popen(
            [*unprivileged(), RSYSLOGD, "-n", "-f", str(conf), "-i", str(self.folder / "pid")],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rsyslogd exited:\n{self.log()}")
            port_file = self.folder / "port"
            if not self.port and port_file.exists():
                text = port_file.read_text().strip()
                self.port = int(text) if text.isdigit() else 0
            if self.port and _listening(self.port):
                return self
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"rsyslogd did not listen in {timeout} s:\n{self.log()}")

    def freeze(self) -> None:
        """SIGSTOP: it reads nothing more until it is stopped or continued."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)

    def stop(self) -> None:
        """SIGTERM: the way an administrator stops it (it drains its queues)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.send_signal(signal.SIGCONT)  # if it was frozen
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.folder, ignore_errors=True)

    def log(self) -> str:
        path = self.folder / "rsyslogd.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def lines(self) -> int:
        try:
            return self.output.read_bytes().count(b"\n")
        except FileNotFoundError:
            return 0

    def received(self) -> list[Received]:
        if not self.output.exists():
            return []
        out = []
        for line in self.output.read_text(encoding="utf-8").splitlines():
            raw = json.loads(line)
            out.append(
                Received(
                    pri=int(raw["pri"]),
                    hostname=raw["hostname"],
                    app=raw["app"],
                    procid=raw["procid"],
                    msgid=raw["msgid"],
                    sd=raw["sd"],
                    timestamp=raw["timestamp"],
                    record=json.loads(raw["msg"]),
                    params={k: v.replace('\\"', '"') for k, v in SD_PARAM.findall(raw["sd"])},
                )
            )
        return out

    def wait_for(self, count: int, timeout: float = 10) -> list[Received]:
        deadline = time.monotonic() + timeout
        while True:
            got = self.received()
            if len(got) >= count or time.monotonic() > deadline:
                return got
            time.sleep(0.02)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


# --- an HTTP collector -------------------------------------------------------------------------


class Collector:
    """A local HTTP server that takes JSON Lines batches, or answers `status` when set."""

    def __init__(self) -> None:
        self.batches: list[tuple[dict[str, str], bytes]] = []
        self.status = 200
        self.location = ""
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status = collector.status
                if status == 200:
                    collector.batches.append((dict(self.headers.items()), body))
                self.send_response(status)
                if collector.location:
                    self.send_header("Location", collector.location)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/audit/ingest?stream=cp"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for _, body in self.batches for line in body.splitlines()]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
