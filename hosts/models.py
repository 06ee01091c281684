"""Hosts, their SSH credentials and the immutable state snapshots probes take of them."""

from __future__ import annotations

import datetime as dt
from typing import Any, NoReturn

import asyncssh
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from controlplane import crypto
from controlplane.canonical import canonical_digest
from controlplane.refusals import Refused

from . import packing, validators
from .choices import VERDICT_SEVERITY, HostKeyStatus, ProbeTrigger, SnapshotStatus, Verdict
from .state import HostState, material_fingerprint


class Credential(models.Model):
    """An SSH private key, stored encrypted. It is never rendered back or logged."""

    name = models.CharField(max_length=100, unique=True)
    private_key_encrypted = models.TextField(editable=False)
    public_key = models.TextField(editable=False, blank=True)
    fingerprint = models.CharField(max_length=100, editable=False, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint})" if self.fingerprint else self.name

    def set_private_key(self, pem: str, passphrase: str | None = None) -> None:
        """Validate and store a private key; a passphrase-protected key is stored unlocked."""
        try:
            key = asyncssh.import_private_key(pem, passphrase)
        except (asyncssh.KeyImportError, ValueError) as exc:
            raise ValidationError(f"Not a usable SSH private key: {exc}") from exc
        unlocked = key.export_private_key("openssh").decode()
        self.private_key_encrypted = crypto.encrypt(unlocked)
        self.public_key = key.export_public_key("openssh").decode().strip()
        self.fingerprint = key.get_fingerprint("sha256")

    def private_key(self) -> str:
        return crypto.decrypt(self.private_key_encrypted)


class Host(models.Model):
    """A GPU machine reached over SSH."""

    name = models.CharField(max_length=63, unique=True, validators=[validators.validate_host_name])
    address = models.CharField(max_length=253, validators=[validators.validate_address])
    port = models.PositiveIntegerField(
        default=22, validators=[MinValueValidator(1), MaxValueValidator(65535)]
    )
    username = models.CharField(
        max_length=32, default="root", validators=[validators.validate_ssh_user]
    )
    use_sudo = models.BooleanField(
        default=False, help_text="Prefix state-changing commands with `sudo -n`."
    )
    credential = models.ForeignKey(
        Credential, on_delete=models.PROTECT, null=True, blank=True, related_name="hosts"
    )
    host_key = models.TextField(blank=True, help_text="The pinned SSH host key (OpenSSH format).")
    host_key_status = models.CharField(
        max_length=10, choices=HostKeyStatus.choices, default=HostKeyStatus.UNKNOWN
    )
    presented_host_key = models.TextField(
        blank=True, help_text="A key the host presented that is not (yet) trusted."
    )
    labels = models.JSONField(default=dict, blank=True, validators=[validators.validate_labels])
    probe_interval_seconds = models.PositiveIntegerField(
        default=60, validators=[MinValueValidator(10), MaxValueValidator(86400)]
    )
    integrity_interval_seconds = models.PositiveIntegerField(
        default=3600, validators=[MinValueValidator(60), MaxValueValidator(7 * 86400)]
    )
    enabled = models.BooleanField(default=True)
    # When the newest probe began: a scheduled one's claim, an on-demand one's store. The
    # beat sweep counts the next probe from here, so hosts keep their interval however long
    # a round takes to store.
    last_probe_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Set while a sweep's batch holding this host waits or runs; cleared when its snapshot is
    # stored. A claim older than its batch could live (the worker died) is taken again.
    probe_claimed_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_integrity_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The newest snapshot holding DCGM's diagnostic: the verdict weighs it until the next one.
    gpu_diagnostic_snapshot = models.ForeignKey(
        "StateSnapshot",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # The newest snapshot's status and the digest of its material fingerprint: a scheduled probe
    # that finds both unchanged (and the verdict too) writes no audit event (hosts.services).
    last_status = models.CharField(max_length=20, blank=True, editable=False)
    material_digest = models.CharField(max_length=64, blank=True, editable=False)
    # Maintenance: someone is working on the host. Probes go on; automation (rollouts, verdict
    # webhooks) leaves it alone until `maintenance_until`. Written by hosts.services.maintenance.
    maintenance_reason = models.TextField(blank=True, editable=False)
    maintenance_since = models.DateTimeField(null=True, blank=True, editable=False)
    maintenance_until = models.DateTimeField(null=True, blank=True, editable=False)
    maintenance_by = models.CharField(max_length=150, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # HostHealth.severity, copied here by a database trigger on every write of a verdict row
    # (migration 0012), so the fleet page sorts, filters and counts by verdict from an index
    # of this table instead of joining and sorting every host. None: never judged.
    verdict_severity = models.PositiveSmallIntegerField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["name"]
        indexes = [
            # the beat sweep: enabled hosts ordered by when they were last probed
            models.Index(fields=["enabled", "last_probe_at"], name="host_probe_due"),
            # the fleet page in verdict order (worst first, never judged before all: DESC
            # puts NULL first on PostgreSQL, as the page's ORDER BY asks)
            models.Index(fields=["-verdict_severity", "name"], name="host_verdict_order"),
            # hosts in maintenance (counted on the fleet page, ended by beat): the few with an
            # end time set, not every host
            models.Index(
                fields=["maintenance_until"],
                name="host_maintenance_until",
                condition=models.Q(maintenance_until__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def host_key_fingerprint(self) -> str:
        return _key_fingerprint(self.host_key)

    @property
    def presented_key_fingerprint(self) -> str:
        return _key_fingerprint(self.presented_host_key)

    def in_maintenance(self, now: dt.datetime | None = None) -> bool:
        """In maintenance at `now`: entered, and its end time not yet passed."""
        now = now or timezone.now()
        return self.maintenance_until is not None and now < self.maintenance_until

    def probe_due(self, now: dt.datetime | None = None) -> bool:
        now = now or timezone.now()
        if self.last_probe_at is None:
            return True
        return (now - self.last_probe_at).total_seconds() >= self.probe_interval_seconds

    def integrity_due(self, now: dt.datetime | None = None) -> bool:
        now = now or timezone.now()
        if self.last_integrity_at is None:
            return True
        return (now - self.last_integrity_at).total_seconds() >= self.integrity_interval_seconds


class HostHealth(models.Model):
    """A host's health verdict and its reasons, as deployments.health last computed them from all
    the evidence. Pages, /metrics and webhooks read this row; nothing recomputes it on its own.
    """

    host = models.OneToOneField(
        Host, on_delete=models.CASCADE, primary_key=True, related_name="health"
    )
    verdict = models.CharField(max_length=10, choices=Verdict.choices, default=Verdict.UNKNOWN)
    # VERDICT_SEVERITY, for sorting
    severity = models.PositiveSmallIntegerField(default=VERDICT_SEVERITY[Verdict.UNKNOWN])
    reasons = models.JSONField(default=list, blank=True)  # [{level, code, text}]
    since = models.DateTimeField()  # when the verdict last changed
    computed_at = models.DateTimeField()
    snapshot = models.ForeignKey(
        "StateSnapshot", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    last_good_snapshot = models.ForeignKey(
        "StateSnapshot", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # What serves, as the fleet page names it: the served name with model and quantization.
    serving = models.CharField(max_length=300, blank=True)
    last_change = models.CharField(max_length=300, blank=True)  # "#12 model swap: rolled back"

    class Meta:
        indexes = [
            # the fleet page sorted and filtered by verdict
            models.Index(fields=["severity", "host"], name="health_severity"),
        ]

    def __str__(self) -> str:
        return f"{self.host_id}: {self.verdict}"


def _key_fingerprint(key_text: str) -> str:
    if not key_text:
        return ""
    try:
        return str(asyncssh.import_public_key(key_text).get_fingerprint("sha256"))
    except (asyncssh.KeyImportError, ValueError):
        return "invalid key"


class ProbeJSONField(models.JSONField):
    """A JSONField inserted with one placeholder per row.

    Django 5.2 bulk-inserts on PostgreSQL through UNNEST of one array per column, and with
    client-side binding (Django's default for psycopg 3) psycopg builds each array's text in
    Python, escaping every character of every JSON document: in a probe round of 250
    snapshots that was a tenth of the worker's CPU (py-spy, bench/README.md). A field with
    `get_placeholder` keeps the plain multi-row VALUES, where each document is one quoted
    string. Nothing else differs. (The probe path itself now stores snapshots with COPY,
    hosts.services.copy_rows; the registration's and the demo's bulk loads still insert.)
    """

    def get_placeholder(self, value: Any, compiler: Any, connection: Any) -> str:
        return "%s"

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        value = super().from_db_value(value, expression, connection)
        if isinstance(value, dict) and PARSED_PACKED_MARK in value:
            return parsed_unpacked(value, jsonb_order=connection.vendor == "postgresql")
        return value


# The parts of a snapshot's `parsed` stored compressed (hosts.packing, with the snapshot's
# dictionary) under PARSED_PACKED_MARK, instead of as JSON: the large ones that change rarely.
# Every read of the column (the model, values(), values_list()) gives them back in place, so
# `parsed` reads as it always did. Never a key that something reads with a JSON key path in
# SQL (hosts.selectors.ROW_STATE_KEYS, `parsed__deployments`, verdicts' integrity): such a
# query would find nothing there (tests/hosts/test_storage_parsed.py holds them apart).
PARSED_PACKED_KEYS = ("gpu_details", "gpu_errors", "topology", "compute_apps")
PARSED_PACKED_MARK = "~packed"


def parsed_for_storage(parsed: dict[str, Any], dictionary_id: int | None) -> dict[str, Any]:
    """`parsed` as stored: PARSED_PACKED_KEYS packed under PARSED_PACKED_MARK as
    [dictionary id, base64 of the compressed JSON]; unchanged when it has none of them."""
    parts = {k: parsed[k] for k in PARSED_PACKED_KEYS if k in parsed}
    if not parts:
        return parsed
    stored = {k: v for k, v in parsed.items() if k not in parts}
    # with the keys' order, which SQLite's JSON keeps (jsonb orders keys its own way)
    packed = packing.pack_json([list(parsed), parts], section_dictionary(dictionary_id))
    stored[PARSED_PACKED_MARK] = [dictionary_id, packed]
    return stored


def parsed_unpacked(stored: dict[str, Any], *, jsonb_order: bool) -> dict[str, Any]:
    """`parsed` whole again from what `parsed_for_storage` stored."""
    mark = stored[PARSED_PACKED_MARK]
    try:
        dictionary_id, packed = mark
        if dictionary_id is not None and not isinstance(dictionary_id, int):
            raise packing.PackingError("the packed parts name no dictionary")
        order, parts = packing.unpack_json(packed, section_dictionary(dictionary_id))
        if not isinstance(parts, dict) or not isinstance(order, list):
            raise packing.PackingError("the packed parts are not [keys, object]")
    except (packing.PackingError, TypeError, ValueError) as exc:
        raise SnapshotBlobCorrupt(str(exc), what="parsed state") from exc
    whole = {k: v for k, v in stored.items() if k != PARSED_PACKED_MARK}
    if not jsonb_order:
        merged = {**whole, **parts}
        return {k: merged[k] for k in [*order, *merged] if k in merged}
    # the rest came from jsonb in its order already; the parts and the top level need it
    whole.update((k, packing.jsonb_ordered(v)) for k, v in parts.items())
    return {k: whole[k] for k in sorted(whole, key=lambda k: (len(k.encode()), k.encode()))}


class SnapshotImmutable(Exception):
    """Raised on any attempt to change a stored snapshot."""


class SnapshotBlobCorrupt(Refused):
    """A stored section's content no longer matches the SHA-256 it is stored under, or no longer
    decompresses. A refusal, so a page or the API that reads it says so in words (409), not 500.
    """

    def __init__(self, message: str, *, what: str = "raw output") -> None:
        super().__init__(
            f"The {what} stored with this snapshot cannot be read back: {message}.",
            code="conflict",
        )


class SectionDictionary(models.Model):
    """A zstd dictionary trained on the fleet's own probe sections (hosts.packing), with which
    sections are compressed: the newest one for whatever is stored now. Never changed; removed by
    retention only once no blob and no snapshot names it and a newer one exists
    (hosts.services.blobs.dictionaries_collect)."""

    content = models.BinaryField()
    sha256 = models.CharField(max_length=64, unique=True)
    samples = models.PositiveIntegerField(help_text="How many section records it was trained on.")
    sample_bytes = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "section dictionaries"

    def __str__(self) -> str:
        return f"section dictionary {self.pk} ({len(self.content)} bytes)"


_prepared_dictionaries: dict[int, packing.Dictionary] = {}


def section_dictionary(pk: int | None) -> packing.Dictionary:
    """Dictionary `pk` ready for zstd, read once per process (a dictionary never changes)."""
    if pk is None:
        return None
    found = _prepared_dictionaries.get(pk)
    if found is None:
        row = SectionDictionary.objects.filter(pk=pk).values_list("content", flat=True).first()
        if row is None:
            raise SnapshotBlobCorrupt(f"compression dictionary {pk} is missing")
        found = _prepared_dictionaries[pk] = packing.prepare(bytes(row))
    return found


class SnapshotBlob(models.Model):
    """One probe section as a probe returned it (output, exit status, truncated), stored once
    however many snapshots saw exactly that: content-addressed by `sha256`, the SHA-256 of the
    section's canonical JSON. An unchanged `nvidia-smi` section costs a snapshot nothing but a
    number in its `raw_index`. Rows are written by hosts.services.blobs and removed only by
    retention, once no snapshot names them.

    Blobs written since migration 0011 hold the section as one compressed record in `packed`
    (hosts.packing, with `dictionary` when one was trained); older ones keep `output`,
    `exit_status` and `truncated` as they were. Both read back through `as_section`.
    """

    sha256 = models.CharField(max_length=64, unique=True)
    output = models.TextField(blank=True)
    exit_status = models.IntegerField(null=True, blank=True)
    truncated = models.BooleanField(default=False)
    packed = models.BinaryField(null=True, blank=True)
    # no plain FK index: `blob_dictionary` (partial, added concurrently) serves retention's
    # "does a blob still need this dictionary?"
    dictionary = models.ForeignKey(
        SectionDictionary,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
    )

    class Meta:
        indexes = [
            models.Index(
                fields=["dictionary"],
                name="blob_dictionary",
                condition=models.Q(dictionary__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"blob {self.sha256[:12]}"

    @staticmethod
    def digest_of(section: dict[str, Any]) -> str:
        return canonical_digest(
            {
                "exit_status": section.get("exit_status"),
                "output": section.get("output", ""),
                "truncated": bool(section.get("truncated", False)),
            }
        )

    def as_section(self) -> dict[str, Any]:
        if self.packed is None:
            section = {
                "output": self.output,
                "exit_status": self.exit_status,
                "truncated": self.truncated,
            }
        else:
            try:
                plain = packing.decompress(self.packed, section_dictionary(self.dictionary_id))
                records = packing.records_read(plain)
            except packing.PackingError as exc:
                raise SnapshotBlobCorrupt(f"section blob {self.pk}: {exc}") from exc
            if len(records) != 1:
                raise SnapshotBlobCorrupt(f"section blob {self.pk} holds {len(records)} records")
            section = records[0][1]
        if self.digest_of(section) != self.sha256:
            raise SnapshotBlobCorrupt(f"section blob {self.pk} does not match its SHA-256")
        return section


class StateSnapshotQuerySet(models.QuerySet["StateSnapshot"]):
    def update(self, **kwargs: Any) -> NoReturn:
        raise SnapshotImmutable("state snapshots cannot be changed")


class StateSnapshot(models.Model):
    """What one probe saw on one host, at one moment by the control plane's clock. Immutable.

    `digest` is SHA-256 over the canonical JSON of `parsed`, so two snapshots with the same
    digest saw the same state, and an approval can bind to exactly what its approver saw.

    The raw output is read as `raw` (each section's output, exit status and whether it was
    cut); it is stored as `raw_index`, each section's SnapshotBlob id, except that the sections
    that differ on every probe (hosts.services.blobs.PACKED_SECTIONS) are 0 there and held in
    `raw_packed`, compressed together with `dictionary` behind their SHA-256 (hosts.packing):
    a blob of its own each would cost its key and index entries every probe. Retention may remove a
    snapshot that nothing references once it is old (hosts.services.retention); it never
    changes one.
    """

    # no plain FK index: `snapshot_host_newest` starts with host and serves every lookup by it
    host = models.ForeignKey(
        Host, on_delete=models.PROTECT, related_name="snapshots", db_index=False
    )
    taken_at = models.DateTimeField(db_index=True)
    status = models.CharField(max_length=20, choices=SnapshotStatus.choices)
    trigger = models.CharField(max_length=10, choices=ProbeTrigger.choices)
    duration_ms = models.PositiveIntegerField()
    raw_index = ProbeJSONField(
        default=dict, blank=True, help_text="Each probe section's SnapshotBlob id; read `raw`."
    )
    raw_packed = models.BinaryField(null=True, blank=True)
    # no plain FK index: `snapshot_dictionary` (partial, added concurrently) serves retention
    dictionary = models.ForeignKey(
        SectionDictionary,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
    )
    parsed = ProbeJSONField(default=dict)
    digest = models.CharField(max_length=64)
    error = models.TextField(blank=True)
    includes_integrity = models.BooleanField(default=False)
    correlation_id = models.CharField(max_length=64, blank=True)

    objects = StateSnapshotQuerySet.as_manager()

    class Meta:
        ordering = ["-taken_at", "-id"]
        indexes = [
            # latest snapshot of a host, and a host's history page. The id is in the key
            # because every such query orders by (taken_at, id): without it PostgreSQL walks
            # the taken_at index past every other host's recent snapshots instead.
            models.Index(fields=["host", "-taken_at", "-id"], name="snapshot_host_newest"),
            # a host's newest integrity check (host page, health evidence of every probe round)
            # without walking past every snapshot since
            models.Index(
                fields=["host", "-taken_at", "-id"],
                name="snapshot_host_newest_check",
                condition=models.Q(includes_integrity=True),
            ),
            # retention: does a snapshot still need this dictionary? (dictionaries_collect)
            models.Index(
                fields=["dictionary"],
                name="snapshot_dictionary",
                condition=models.Q(dictionary__isnull=False),
            ),
        ]
        # On PostgreSQL, migration 0004 adds `snapshot_raw_blobs`: a GIN index over the blob ids
        # in raw_index, which retention asks before it removes a blob.

    def __str__(self) -> str:
        return f"{self.host} @ {self.taken_at:%Y-%m-%d %H:%M:%S} ({self.status})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise SnapshotImmutable("state snapshots cannot be changed")
        super().save(*args, **kwargs)

    @property
    def raw(self) -> dict[str, Any]:
        """Each probe section's output and exit status: the one way to read raw output. One
        query the first time, checked against each section's SHA-256."""
        cached: dict[str, Any] | None = getattr(self, "_raw", None)
        if cached is None:
            cached = self._raw = raw_sections(
                self.raw_index, self.raw_packed, self.dictionary_id, snapshot_id=self.pk
            )
        return cached

    def age_seconds(self, now: dt.datetime | None = None) -> float:
        return max(0.0, ((now or timezone.now()) - self.taken_at).total_seconds())

    def state(self) -> HostState:
        """The parsed state as the parsers produced it: the one way to read a snapshot.

        Read once per instance (a snapshot never changes): a probe round asks it for the
        material fingerprint, the chart samples and the drift check of the same snapshots.
        """
        cached = self.__dict__.get("_host_state")
        if cached is None or cached[0] is not self.parsed:
            cached = self.__dict__["_host_state"] = (self.parsed, HostState.from_json(self.parsed))
        state: HostState = cached[1]
        return state

    def state_known(self, parsed: dict[str, Any], state: HostState) -> None:
        """Set `parsed` with the state it is the JSON of (the probe that just stored it had both),
        so state() need not read it back."""
        self.parsed = parsed
        self.__dict__["_host_state"] = (parsed, state)

    def state_in_hand(self) -> HostState | None:
        """The state if this instance holds it already (read, or handed over by state_known),
        else None: no JSON is read."""
        cached = self.__dict__.get("_host_state")
        return cached[1] if cached is not None and cached[0] is self.parsed else None

    def material_fingerprint(self) -> dict[str, Any]:
        return material_fingerprint(self.state())


def raw_sections(
    index: dict[str, Any],
    packed: bytes | memoryview | None = None,
    dictionary_id: int | None = None,
    *,
    snapshot_id: int | None = None,
) -> dict[str, Any]:
    """{section: {output, exit_status, truncated}} for a snapshot's raw_index (blob ids, 0 for a
    section in `packed`), in raw_index's order, with one query for the blobs."""
    if not index:
        return {}
    inline: dict[str, Any] = {}
    if packed is not None:
        try:
            inline = dict(packing.unpack_sections(packed, section_dictionary(dictionary_id)))
        except packing.PackingError as exc:
            raise SnapshotBlobCorrupt(f"snapshot {snapshot_id}'s packed sections: {exc}") from exc
    wanted = {pk for pk in index.values() if pk}
    blobs = SnapshotBlob.objects.in_bulk(wanted) if wanted else {}
    missing = {
        name for name, pk in index.items() if (pk not in blobs if pk else name not in inline)
    }
    if missing:
        raise SnapshotBlobCorrupt(f"section blobs missing for {sorted(missing)}")
    return {name: blobs[pk].as_section() if pk else inline[name] for name, pk in index.items()}


class SnapshotRetention(models.Model):
    """How far snapshot thinning has got, per tier (one row; hosts.services.retention)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    dense_until = models.DateTimeField(null=True, blank=True)
    sparse_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"thinned to {self.dense_until} / {self.sparse_until}"


# GpuSample's chart index: the range the chart query filters on, then every column it reads.
CHART_INDEX_FIELDS = (
    *("host", "minute", "gpu"),
    *("memory_used_mib", "memory_total_mib", "power_draw_w", "utilization_pct", "temperature_c"),
)


class GpuSample(models.Model):
    """One GPU's readings from one ok/partial snapshot, flattened out of `parsed` for charts.

    Charts aggregate weeks of history with GROUP BY in the database; reading the same numbers
    out of each snapshot's JSON would mean loading every snapshot into Python. Rows are written
    with their snapshot, in the same transaction (`hosts.services.samples`).

    Keyed by (snapshot, GPU), with no id and no time but the minute: eight rows a probe, so
    every column and index entry is paid eight times (bench/README.md, "Storage per host").
    """

    pk = models.CompositePrimaryKey("snapshot", "gpu")
    # No separate FK indexes: `gpusample_host_chart` starts with host and the primary key
    # starts with snapshot, so each already serves its column's lookups and cascades.
    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="+", db_index=False)
    snapshot = models.ForeignKey(
        StateSnapshot, on_delete=models.CASCADE, related_name="gpu_samples", db_index=False
    )
    # Whole minutes since the epoch: buckets of any size are an integer division of this, the
    # same SQL on PostgreSQL and SQLite (date truncation functions differ between the two).
    minute = models.IntegerField()
    gpu = models.PositiveSmallIntegerField(help_text="nvidia-smi index")
    memory_used_mib = models.PositiveIntegerField(null=True)
    memory_total_mib = models.PositiveIntegerField(null=True)
    power_draw_w = models.FloatField(null=True)
    utilization_pct = models.PositiveSmallIntegerField(null=True)
    temperature_c = models.SmallIntegerField(null=True)

    class Meta:
        indexes = [
            # gpu_chart_series: one host's samples in a window's minutes. Every column the
            # query reads is in the key, so it is an index-only scan: a week is ~1,000 index
            # pages, where the rows themselves are spread over ~7,000+ heap pages because
            # probes write every host's samples of a minute together (bench/gpu_charts.py).
            models.Index(fields=[*CHART_INDEX_FIELDS], name="gpusample_host_chart"),
        ]

    def __str__(self) -> str:
        at = dt.datetime.fromtimestamp(self.minute * 60, tz=dt.UTC)
        return f"{self.host_id} GPU {self.gpu} @ {at:%Y-%m-%d %H:%M}"

    @staticmethod
    def minute_of(taken_at: dt.datetime) -> int:
        return int(taken_at.timestamp()) // 60
