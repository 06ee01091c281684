"""The receiving side's example (controlplane/audit/streaming/rsyslog-receiver.conf), run as it
is shipped, with only its paths and port moved: the stream arrives over TLS with a client
certificate, a record per line that a receiver can verify, and a client without the certificate
the example permits is turned away."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.audit.streaming import delivery
from tests.audit.conftest import make_events

from .conftest import assert_continuous, destination
from .receivers import RSYSLOGD, Pki, hand_over, make_pki, receiver_folder, unprivileged

# Seen within the wait after the handshake, or, later, as the reset that answers the batch.
REFUSED = re.compile("did it refuse the client certificate|closed the connection before")
EXAMPLE = Path(__file__).resolve().parents[3] / "controlplane/audit/streaming/rsyslog-receiver.conf"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db,
    pytest.mark.usefixtures("postgresql"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def example_receiver(pki: Pki) -> Iterator[tuple[int, Path]]:
    port = _free_port()
    folder = receiver_folder("audit-rsyslog-example-")
    output = folder / "audit.jsonl"
    ca, cert, key = hand_over(folder, pki.ca, pki.server_cert, pki.server_key)
    text = EXAMPLE.read_text()
    for shipped, here in (
        ("/etc/rsyslog.d/controlplane/ca.pem", ca),
        ("/etc/rsyslog.d/controlplane/server.pem", cert),
        ("/etc/rsyslog.d/controlplane/server.key", key),
        ("/var/log/controlplane/audit.jsonl", output),
        ('port="6514"', f'address="127.0.0.1" port="{port}"'),
    ):
        assert shipped in text
        text = text.replace(shipped, str(here))
    conf = folder / "rsyslog.conf"
    # What Debian's rsyslog.conf sets before it reads /etc/rsyslog.d/.
    conf.write_text(f'global(workDirectory="{folder}")\n{text}')
    log = (folder / "rsyslogd.log").open("wb")
    proc = subprocess.Popen(
        [*unprivileged(), RSYSLOGD, "-n", "-f", str(conf), "-i", str(folder / "pid")],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, (
                folder / "rsyslogd.log"
            ).read_text()
            time.sleep(0.05)
    yield port, output
    proc.terminate()
    proc.wait(15)
    shutil.rmtree(folder, ignore_errors=True)


def _records(path: Path, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            break
        time.sleep(0.05)
    return [json.loads(line) for line in lines]


def test_the_example_receives_a_verifiable_stream_from_the_permitted_client(
    example_receiver: tuple[int, Path], pki: Pki, use_streams: Callable[..., None]
) -> None:
    port, output = example_receiver
    make_events(4)
    siem = destination(
        kind="syslog", host="localhost", port=port, ca_file=str(pki.ca),
        cert_file=str(pki.client_cert), key_file=str(pki.client_key),
    )  # fmt: skip
    use_streams(siem)

    assert delivery.stream_deliver(destination=siem).status == "caught_up"

    stream = _records(output, 5)
    assert [r["seq"] for r in stream] == [1, 2, 3, 4, 5]
    assert assert_continuous(stream) == []


def test_the_example_turns_away_a_client_it_does_not_permit(
    example_receiver: tuple[int, Path], pki: Pki, tmp_path: Path, use_streams: Callable[..., None]
) -> None:
    port, output = example_receiver
    stranger = make_pki(tmp_path / "stranger", label="stranger")  # another CA's client
    make_events(1)
    siem = destination(
        kind="syslog", host="localhost", port=port, ca_file=str(pki.ca),
        cert_file=str(stranger.client_cert), key_file=str(stranger.client_key),
    )  # fmt: skip
    use_streams(siem)

    outcome = delivery.stream_deliver(destination=siem)

    assert outcome.status == "failed"
    assert REFUSED.search(outcome.error), outcome.error
    assert not output.exists() or output.read_text() == ""
