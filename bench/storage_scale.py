#!/usr/bin/env python
"""Storage per host per day, before and after content-addressed raw output, audit-on-change
and retention; and how long `verify_audit` takes for a year of events at either rate.

    .venv/bin/python bench/storage_scale.py --hosts 1000 --rounds 6 \\
        --database postgres://postgres@127.0.0.1:5432/controlplane

What it does, on a fresh PostgreSQL database (`storage_bench`):
1. starts `--hosts` simulated hosts (one process per 2,500, on 127.0.10.k) and registers them;
2. probes them `--rounds` times through `hosts.services.hosts_probe` (trigger "schedule": the
   path beat's batches take), a minute of the simulated clock apart, and measures what the
   rounds after the first added on disk: every table and index they write (snapshots, their
   GIN index, GPU samples, blobs, audit events, hosts), with pg_total_relation_size after a
   VACUUM of each;
3. "before" is the same rounds as the product stored them until now: the snapshot row with its
   raw output inline (measured: the same rows copied into a table of the old shape, raw as
   JSON) and one audit event per probe (measured: the audit table's size, its indexes
   included, shared out by each row's size, for the probe.completed events in it);
4. thins with `snapshots_thin` as if 40 days had passed, and measures what one kept snapshot
   costs (a snapshot kept past 30 days, with its samples and the blobs only it names);
5. appends `--events` audit events through `record_many` in two halves and times
   `manage.py verify_audit` after each: the difference is the marginal cost per event, the
   rest the command's fixed cost (start-up, checkpoints), to extrapolate a year of events at
   the before and after rates. All sizes are compacted (VACUUM FULL) sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time
from pathlib import Path

import scaffold

# probe_scale's folder: the same simulated fleet's keys and state
STATE = scaffold.ROOT / ".run" / "bench-scale"
CHECKPOINTS = STATE / "storage-checkpoints"
DB_NAME = "storage_bench"
TABLES = [
    "hosts_statesnapshot", "hosts_gpusample", "hosts_snapshotblob", "hosts_host",
    "hosts_hosthealth", "audit_auditevent",
]  # fmt: skip
DAY = 1440  # probes per host per day at 60 s


def start_sim_slices(hosts: int, procs: int, network: str) -> list:
    """scaffold.start_sim_slices, on `network`.k+1 instead of 127.0.10.k+1."""
    if network == "127.0.10":
        return scaffold.start_sim_slices(hosts, procs, STATE)
    from simulator.server import host_names

    names = host_names(hosts)
    per = -(-hosts // procs)
    children = []
    for k in range(procs):
        (STATE / f"sim{k}.json").unlink(missing_ok=True)
        chunk = names[k * per : (k + 1) * per]
        argv = [scaffold.sys.executable, scaffold.__file__, str(k), f"{network}.{k + 1}",
                ",".join(chunk), str(STATE)]  # fmt: skip
        children.append(subprocess.Popen(argv, cwd=scaffold.ROOT, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))  # fmt: skip
        if k == 0:
            scaffold.wait_for((STATE / "fleet" / "client_ed25519").exists, 60, "client key")
    for k, child in enumerate(children):
        scaffold.wait_for((STATE / f"sim{k}.json").exists, 300, f"simulator {k}", child)
    return children


def sizes(cursor) -> dict[str, int]:
    """Each table's size with its indexes and TOAST, compacted (VACUUM FULL): the old-shape
    copy below is compact by construction, and a plain VACUUM never gives back what retention
    frees, so only compacted sizes compare."""
    out = {}
    for table in TABLES:
        cursor.execute(f"VACUUM FULL {table}")
        cursor.execute("SELECT pg_total_relation_size(%s)", [table])
        out[table] = cursor.fetchone()[0]
    return out


def main() -> None:
    parser = scaffold.parser_for(__doc__)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--database", default=scaffold.DEFAULT_DATABASE)
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument(
        "--sim-network",
        default="127.0.10",
        help="the simulated fleet listens on <this>.1, .2, ... (another benchmark may hold "
        "scaffold's 127.0.10.k)",
    )
    args = parser.parse_args()

    db_url = scaffold.fresh_database(args.database, DB_NAME)
    scaffold.migrate_in_child(dict(os.environ, DATABASE_URL=db_url))
    STATE.mkdir(parents=True, exist_ok=True)
    scaffold.fresh_checkpoints(CHECKPOINTS)
    procs = scaffold.sim_slices_for(args.hosts)
    sims = start_sim_slices(args.hosts, procs, args.sim_network)
    try:
        scaffold.django_setup(db_url)
        result = measure(args, procs, db_url)
    finally:
        scaffold.stop_all(sims)
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))


def measure(args: argparse.Namespace, procs: int, db_url: str) -> dict:
    import datetime as dt

    import time_machine
    from django.db import connection
    from django.utils import timezone

    from controlplane.audit import services as audit
    from controlplane.audit.actions import AuditAction
    from controlplane.audit.context import acting
    from hosts import services
    from hosts.models import Host, StateSnapshot
    from hosts.services.dictionaries import section_dictionary_train
    from hosts.services.retention import snapshots_thin

    scaffold.register_sim_slices(procs, STATE)
    hosts = list(Host.objects.select_related("credential").prefetch_related("deployments"))
    start = timezone.now()
    cursor = connection.cursor()

    def round_at(minute: int) -> list:
        with time_machine.travel(start + dt.timedelta(minutes=minute), tick=True), \
                acting("system:beat"):  # fmt: skip
            return services.hosts_probe(hosts=hosts, trigger="schedule", integrity=False)

    first = round_at(0)
    first_ids = [s.pk for s in first]
    # the dictionary, trained on the fleet's own sections (the first round's), as an operator
    # would with `manage.py train_section_dictionary` once the fleet has been probed
    t = time.perf_counter()
    trained = section_dictionary_train()
    train_wall = time.perf_counter() - t
    base = sizes(cursor)
    walls = []
    for minute in range(1, args.rounds):
        t = time.perf_counter()
        round_at(minute)
        walls.append(time.perf_counter() - t)
    grown = sizes(cursor)
    probes = args.hosts * (args.rounds - 1)
    per_probe = {t: (grown[t] - base[t]) / probes for t in TABLES}
    after_probe = sum(per_probe.values())
    cursor.execute("SELECT count(*) FROM audit_auditevent")
    events_total = cursor.fetchone()[0]
    cursor.execute("SELECT count(*) FROM hosts_statesnapshot WHERE id > %s", [max(first_ids)])
    later_snapshots = cursor.fetchone()[0]
    cursor.execute(
        "SELECT count(*) FROM audit_auditevent WHERE action = 'probe.completed' "
        "AND snapshot_id > %s", [max(first_ids)])  # fmt: skip
    later_events = cursor.fetchone()[0]

    # Before, as e15f78b stored the same rounds: every section a blob of its own, uncompressed.
    e15 = e15f78b_layout(cursor, max(first_ids), later_snapshots)
    codec = section_codec(max(first_ids), trained.pk)

    # Before blobs: the same snapshots with raw inline, and an audit event for every probe.
    cursor.execute("DROP TABLE IF EXISTS bench_old_snapshot")
    cursor.execute("CREATE TABLE bench_old_snapshot (LIKE hosts_statesnapshot INCLUDING ALL)")
    cursor.execute("ALTER TABLE bench_old_snapshot DROP COLUMN raw_index, DROP COLUMN raw_packed, "
                   "DROP COLUMN dictionary_id, ADD COLUMN raw jsonb")  # fmt: skip
    cursor.execute("DROP INDEX IF EXISTS bench_old_snapshot_expr_idx")
    columns = ("id, host_id, taken_at, status, trigger, duration_ms, parsed, digest, error, "
               "includes_integrity, correlation_id")  # fmt: skip
    cursor.execute(
        f"INSERT INTO bench_old_snapshot ({columns}, raw) SELECT "
        f"{whole_parsed(columns)}, i.raw "
        "FROM hosts_statesnapshot s JOIN bench_e15_index i ON i.id = s.id")  # fmt: skip
    cursor.execute("DROP TABLE bench_e15_index")
    cursor.execute("VACUUM bench_old_snapshot")
    cursor.execute("SELECT pg_total_relation_size('bench_old_snapshot')")
    old_snapshot = cursor.fetchone()[0] / later_snapshots
    cursor.execute(
        "SELECT pg_total_relation_size('audit_auditevent')::float * sum(pg_column_size(a.*)) "
        "FILTER (WHERE action = 'probe.completed') / sum(pg_column_size(a.*)) / count(*) "
        "FILTER (WHERE action = 'probe.completed') FROM audit_auditevent a")  # fmt: skip
    per_event = float(cursor.fetchone()[0])
    # Which raw sections the counted rounds stored anew: a section whose output changes on
    # every probe gets a new blob every time, however it is addressed.
    cursor.execute(
        "SELECT k.key, count(DISTINCT k.value)::float / count(*), "
        "avg(coalesce(pg_column_size(b.packed), pg_column_size(b.output)))::float "
        "FROM hosts_statesnapshot s "
        "CROSS JOIN LATERAL jsonb_each(s.raw_index) k "
        "JOIN hosts_snapshotblob b ON b.id = (k.value)::bigint WHERE s.id > %s "
        "GROUP BY 1 ORDER BY 1", [max(first_ids)])  # fmt: skip
    sections = [(k, float(new), float(size)) for k, new, size in cursor.fetchall()]
    cursor.execute("SELECT avg(pg_column_size(raw)), avg(pg_column_size(parsed)) "
                   "FROM bench_old_snapshot")  # fmt: skip
    raw_col, parsed_col = (float(x) for x in cursor.fetchone())
    before_probe = old_snapshot + per_probe["hosts_gpusample"] + per_event
    cursor.execute("DROP TABLE bench_old_snapshot")

    # After retention: what a snapshot kept past 30 days costs.
    pre_thin = sizes(cursor)
    cursor.execute("SELECT count(*) FROM hosts_statesnapshot")
    pre_count = cursor.fetchone()[0]
    t = time.perf_counter()
    thinned = snapshots_thin(now=start + dt.timedelta(days=40))
    thin_wall = time.perf_counter() - t
    post_thin = sizes(cursor)
    # A transaction left open elsewhere on the server (another test run's) holds back what
    # VACUUM FULL may remove: then the freed space cannot be seen in the sizes.
    cursor.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE (backend_xmin IS NOT NULL OR "
        "backend_xid IS NOT NULL) AND pid <> pg_backend_pid()")  # fmt: skip
    horizon_held = cursor.fetchone()[0]
    cursor.execute("SELECT count(*) FROM hosts_statesnapshot")
    post_count = cursor.fetchone()[0]
    removed = pre_count - post_count
    per_removed = sum(pre_thin[t] - post_thin[t] for t in TABLES) / removed if removed else 0
    kept_per_day = 24
    steady = kept_per_day * after_probe  # a kept snapshot costs what a probe stored
    changes_per_day = later_events / (args.hosts * (args.rounds - 1)) * DAY

    # verify_audit: append events through the real chain, then time the command.
    host = hosts[0]
    snap = StateSnapshot.objects.filter(host=host).first()
    batch = [{"action": AuditAction.PROBE_COMPLETED, "target": snap, "host": host,
              "snapshot": snap, "data": {"status": "ok", "trigger": "schedule",
                                         "duration_ms": 70}}] * 1000  # fmt: skip
    env = dict(os.environ, DATABASE_URL=db_url, AUDIT_CHECKPOINT_DIR=str(CHECKPOINTS))
    append_wall = 0.0
    points = []  # (events in the chain, verify_audit seconds, its output)
    for _half in range(2):
        t = time.perf_counter()
        with acting("system:beat"):
            for _ in range(args.events // 2000):
                audit.record_many(batch)
        append_wall += time.perf_counter() - t
        cursor.execute("SELECT count(*) FROM audit_auditevent")
        chain = cursor.fetchone()[0]
        t = time.perf_counter()
        out = subprocess.run(scaffold.manage_argv("verify_audit"), cwd=scaffold.ROOT, env=env,
                             capture_output=True, text=True)  # fmt: skip
        points.append((chain, time.perf_counter() - t, out))
    (n1, t1, out1), (n2, t2, out) = points
    # the command's own rate (its walk, timed inside it); the rest of its wall time is start-up
    found = re.search(r"([\d,]+) events/s", out.stdout)
    rate = float(found[1].replace(",", "")) if found else n2 / t2
    fixed = t2 - n2 / rate
    verify_wall = t2
    year_before = args.hosts * DAY * 365
    # a fleet whose state never moved writes no probe events; count one a host a day
    year_after = args.hosts * 365 * max(changes_per_day, 1.0)
    return {
        "hosts": args.hosts, "rounds": args.rounds, "round_wall_s": walls,
        "per_probe_after": per_probe, "after_probe_bytes": after_probe,
        "old_snapshot_row_bytes": old_snapshot, "raw_column_bytes": raw_col,
        "parsed_column_bytes": parsed_col, "audit_event_bytes": per_event,
        "before_probe_bytes": before_probe,
        "before_host_day": before_probe * DAY, "after_ingest_host_day": after_probe * DAY,
        "after_steady_host_day": steady + changes_per_day * per_event,
        "window_per_host_bytes": after_probe * (DAY + 30 * 144),
        "audit_events_later_rounds": later_events, "events_total_before_append": events_total,
        "changes_per_host_day": changes_per_day,
        "thin_wall_s": thin_wall, "thin_removed": removed, "thin_examined": thinned.examined,
        "thin_blobs_removed": thinned.blobs_removed, "bytes_freed_per_removed": per_removed,
        "horizon_held_by": horizon_held,
        "append_events_per_s": args.events // 2000 * 2000 / append_wall,
        "verify_events": chain, "verify_wall_s": verify_wall, "verify_rate": rate,
        "verify_first": [n1, t1], "verify_fixed_s": fixed,
        "verify_ok": out.returncode == 0 and out1.returncode == 0,
        "verify_out": out.stdout.strip()[-300:],
        "year_events_before": year_before, "year_events_after": year_after,
        "year_verify_before_s": fixed + year_before / rate,
        "year_verify_after_s": fixed + year_after / rate, "sections": sections,
        "e15f78b": e15, "codec": codec, "dictionary_bytes": len(trained.content),
        "dictionary_samples": trained.samples, "train_wall_s": train_wall,
        "e15f78b_probe_bytes": e15["snapshot"] + e15["blob"] + sum(
            per_probe[t] for t in TABLES if t not in ("hosts_statesnapshot", "hosts_snapshotblob")),
    }  # fmt: skip


def whole_parsed(columns: str) -> str:
    """The snapshot's columns, `parsed` taken whole from bench_e15_index (i)."""
    names = [c.strip() for c in columns.split(",")]
    return ", ".join(("i." if c == "parsed" else "s.") + c for c in names)


def e15f78b_layout(cursor, first_max: int, counted: int) -> dict:
    """Bytes per probe of the counted rounds in e15f78b's layout: each section a blob (output
    uncompressed, SHA-256 key), found again when the same content was stored before (in round
    one or an earlier counted round), and the snapshot naming every section by blob id."""
    from hosts.models import SnapshotBlob, StateSnapshot

    sha_ids: dict[str, int] = {}
    new_blobs: list[tuple[int, str, dict]] = []
    indexes: list[tuple[int, str, str, str]] = []
    rows = StateSnapshot.objects.order_by("id").only(
        "id", "raw_index", "raw_packed", "dictionary", "parsed"
    )
    for snapshot in rows.iterator(chunk_size=500):
        index = {}
        for name, section in snapshot.raw.items():
            sha = SnapshotBlob.digest_of(section)
            if sha not in sha_ids:
                sha_ids[sha] = len(sha_ids) + 1
                if snapshot.pk > first_max:
                    new_blobs.append((sha_ids[sha], sha, section))
            index[name] = sha_ids[sha]
        if snapshot.pk > first_max:
            indexes.append(
                (snapshot.pk, json.dumps(index), json.dumps(snapshot.raw),
                 json.dumps(snapshot.parsed))
            )  # fmt: skip
    cursor.execute("DROP TABLE IF EXISTS bench_e15_blob")
    cursor.execute("CREATE TABLE bench_e15_blob (id bigint PRIMARY KEY, sha256 varchar(64) "
                   "UNIQUE NOT NULL, output text NOT NULL, exit_status integer, "
                   "truncated boolean NOT NULL)")  # fmt: skip
    cursor.executemany(
        "INSERT INTO bench_e15_blob VALUES (%s, %s, %s, %s, %s)",
        [(pk, sha, sec["output"], sec["exit_status"], sec["truncated"])
         for pk, sha, sec in new_blobs])  # fmt: skip
    cursor.execute("DROP TABLE IF EXISTS bench_e15_snapshot")
    cursor.execute("CREATE TABLE bench_e15_snapshot (LIKE hosts_statesnapshot INCLUDING ALL)")
    cursor.execute("ALTER TABLE bench_e15_snapshot DROP COLUMN raw_packed, "
                   "DROP COLUMN dictionary_id")  # fmt: skip
    # (the raw output as JSON stays for the older layout's measure, which drops it)
    cursor.execute(
        "CREATE TABLE bench_e15_index (id bigint, raw_index jsonb, raw jsonb, parsed jsonb)"
    )
    cursor.executemany("INSERT INTO bench_e15_index VALUES (%s, %s, %s, %s)", indexes)
    columns = ("id, host_id, taken_at, status, trigger, duration_ms, parsed, digest, error, "
               "includes_integrity, correlation_id")  # fmt: skip
    cursor.execute(
        f"INSERT INTO bench_e15_snapshot ({columns}, raw_index) SELECT "
        f"{whole_parsed(columns)}, i.raw_index "
        "FROM hosts_statesnapshot s JOIN bench_e15_index i ON i.id = s.id")  # fmt: skip
    out = {}
    for key, table in (("snapshot", "bench_e15_snapshot"), ("blob", "bench_e15_blob")):
        cursor.execute(f"VACUUM FULL {table}")
        cursor.execute("SELECT pg_total_relation_size(%s)", [table])
        out[key] = cursor.fetchone()[0] / counted
    cursor.execute("SELECT avg(pg_column_size(parsed)) FROM bench_e15_snapshot")
    out["parsed"] = float(cursor.fetchone()[0])
    cursor.execute("SELECT avg(pg_column_size(parsed)), avg(pg_column_size(raw_index)), "
                   "avg(pg_column_size(raw_packed)) FROM hosts_statesnapshot WHERE id > %s",
                   [first_max])  # fmt: skip
    out["parsed_now"], out["raw_index_now"], out["raw_packed_now"] = (
        float(x or 0) for x in cursor.fetchone()
    )
    cursor.execute("DROP TABLE bench_e15_snapshot, bench_e15_blob")
    out["new_blobs_per_probe"] = len(new_blobs) / counted
    return out


def section_codec(first_max: int, dictionary_id: int, sample: int = 1000) -> dict:
    """Per section (unit sections by their prefix): mean bytes as a record, with zstd alone and
    with the trained dictionary; and the CPU per probe of what the probe path does with them,
    measured on `sample` snapshots of the counted rounds."""
    from controlplane.canonical import canonical_digest
    from hosts import packing
    from hosts.models import (
        SnapshotBlob,
        StateSnapshot,
        parsed_for_storage,
        parsed_unpacked,
        section_dictionary,
    )
    from hosts.services.blobs import packed_section

    dictionary = section_dictionary(dictionary_id)
    raws = [s.raw for s in StateSnapshot.objects.filter(id__gt=first_max).order_by("?")[:sample]]
    table: dict[str, list[int]] = {}
    for raw in raws:
        for name, section in raw.items():
            record = packing.record_of(name, section)
            row = table.setdefault(name.split(":")[0], [0, 0, 0])
            row[0] += len(record)
            row[1] += len(packing.compress(record, None))
            row[2] += len(packing.compress(record, dictionary))
    n = len(raws)

    def cpu(work) -> float:
        t = time.process_time()
        for raw in raws:
            work(raw)
        return (time.process_time() - t) / n * 1000

    def before(raw) -> None:  # e15f78b: a digest per section
        for section in raw.values():
            canonical_digest(section)

    def after(raw) -> None:  # a digest per blob section, the packed ones compressed together
        packed = [(k, v) for k, v in raw.items() if packed_section(k)]
        for k, v in raw.items():
            if not packed_section(k):
                SnapshotBlob.digest_of(v)
        packing.pack_sections(packed, dictionary)

    def blobs_all_new(raw) -> None:  # compressing every blob section, as if all were new
        for k, v in raw.items():
            if not packed_section(k):
                packing.compress(packing.record_of("", v), dictionary)

    parsed_sample = [
        s.parsed for s in StateSnapshot.objects.filter(id__gt=first_max).order_by("?")[:sample]
    ]

    # what the worker does with `parsed` on a write (Django encodes it to JSON) and a read
    # (decodes it), whole as e15f78b did and with its large parts packed: the difference
    def per_snapshot_ms(work) -> float:
        t = time.process_time()
        for p in parsed_sample:
            work(p)
        return (time.process_time() - t) / len(parsed_sample) * 1000

    texts = {id(p): json.dumps(p) for p in parsed_sample}
    stored_texts = {id(p): json.dumps(parsed_for_storage(p, dictionary_id)) for p in parsed_sample}
    parsed_pack_ms = per_snapshot_ms(
        lambda p: json.dumps(parsed_for_storage(p, dictionary_id))
    ) - per_snapshot_ms(json.dumps)
    parsed_read_ms = per_snapshot_ms(
        lambda p: parsed_unpacked(json.loads(stored_texts[id(p)]), jsonb_order=True)
    ) - per_snapshot_ms(lambda p: json.loads(texts[id(p)]))

    packs = [packing.pack_sections([(k, v) for k, v in raw.items() if packed_section(k)],
                                   dictionary) for raw in raws]  # fmt: skip
    t = time.process_time()
    for packed in packs:
        packing.unpack_sections(packed, dictionary)
    read_ms = (time.process_time() - t) / n * 1000
    return {
        "sections": {k: [v / n for v in row] for k, row in sorted(table.items())},
        "cpu_before_ms": cpu(before),
        "cpu_after_ms": cpu(after),
        "cpu_blobs_all_new_ms": cpu(blobs_all_new),
        "cpu_read_packed_ms": read_ms,
        "packed_bytes": sum(len(p) for p in packs) / n,
        "parsed_pack_ms": parsed_pack_ms,
        "parsed_unpack_ms": parsed_read_ms,
    }


def report(r: dict) -> None:
    kb = 1024
    print(f"\n{r['hosts']} hosts, {r['rounds']} rounds (the first one not counted); warm "
          f"rounds took {', '.join(f'{w:.1f}' for w in r['round_wall_s'])} s")  # fmt: skip
    print("bytes one scheduled probe adds, after:")
    for table, b in r["per_probe_after"].items():
        print(f"  {table:<22} {b:>9.0f}")
    print(f"  {'total':<22} {r['after_probe_bytes']:>9.0f}")
    print(f"before blobs (2026-12-01): snapshot row with raw inline "
          f"{r['old_snapshot_row_bytes']:.0f} B (raw "
          f"column {r['raw_column_bytes']:.0f} B, parsed {r['parsed_column_bytes']:.0f} B "
          f"as stored), an audit event {r['audit_event_bytes']:.0f} B, total "
          f"{r['before_probe_bytes']:.0f} B per probe")  # fmt: skip
    print(f"per host per day: before {r['before_host_day'] / kb / kb:.1f} MB; after, the "
          f"first 24 h {r['after_ingest_host_day'] / kb / kb:.1f} MB (kept whole for a day), "
          f"then {r['after_steady_host_day'] / kb:.0f} KB a day for ever (24 kept snapshots "
          f"and {r['changes_per_host_day']:.2f} audit events); bounded window per host (24 h "
          f"+ 30 days at 10 min) {r['window_per_host_bytes'] / kb / kb:.1f} MB")  # fmt: skip
    e15 = r["e15f78b"]
    print(f"before, as e15f78b stored the same rounds (each section a blob, uncompressed): "
          f"snapshot {e15['snapshot']:.0f} B, blobs {e15['blob']:.0f} B "
          f"({e15['new_blobs_per_probe']:.2f} new per probe), total "
          f"{r['e15f78b_probe_bytes']:.0f} B per probe")  # fmt: skip
    for label, probe in (("e15f78b", r["e15f78b_probe_bytes"]), ("now", r["after_probe_bytes"])):
        print(f"  {label:<8} per host: first 24 h {probe * DAY / kb / kb:5.2f} MB a day; "
              f"standing (24 h whole + 30 days at 10 min) "
              f"{probe * (DAY + 30 * 144) / kb / kb:5.1f} MB")  # fmt: skip
    c = r["codec"]
    print(f"dictionary: {r['dictionary_bytes']} B trained on {r['dictionary_samples']} distinct "
          f"sections of the first round in {r['train_wall_s']:.1f} s; mean bytes per section "
          f"(record / zstd / zstd + dictionary, ratio to the record):")  # fmt: skip
    for name, (plain, zstd, dictd) in c["sections"].items():
        print(f"  {name:<20} {plain:7.0f} {zstd:6.0f} {dictd:6.0f}   "
              f"x{plain / max(zstd, 1):4.1f} x{plain / max(dictd, 1):5.1f}")  # fmt: skip
    print(f"packed sections per snapshot {c['packed_bytes']:.0f} B with their SHA-256; CPU per "
          f"probe: e15f78b's digests {c['cpu_before_ms']:.3f} ms, now (digests of blob "
          f"sections + packing the four) {c['cpu_after_ms']:.3f} ms, compressing every blob "
          f"section as if all were new {c['cpu_blobs_all_new_ms']:.3f} ms, reading the packed "
          f"ones back {c['cpu_read_packed_ms']:.3f} ms")  # fmt: skip
    print(f"parsed as stored: e15f78b {e15['parsed']:.0f} B, now {e15['parsed_now']:.0f} B "
          f"(its large parts packed: {c['parsed_pack_ms']:+.3f} ms of CPU per write, "
          f"{c['parsed_unpack_ms']:+.3f} ms per read, against JSON of the whole); raw_index now "
          f"{e15['raw_index_now']:.0f} B, raw_packed {e15['raw_packed_now']:.0f} B")  # fmt: skip
    print(f"audit events written by the counted rounds: {r['audit_events_later_rounds']}")
    print("blob sections in the counted rounds: new blobs per probe, mean bytes as stored")
    for key, new, size in r["sections"]:
        print(f"  {key:<32} {new:>5.2f} {size:>7.0f}")
    print(f"retention at +40 days: examined {r['thin_examined']}, removed {r['thin_removed']} "
          f"snapshots and {r['thin_blobs_removed']} blobs in {r['thin_wall_s']:.1f} s, "
          f"{r['bytes_freed_per_removed']:.0f} B freed per removed snapshot (compacted; "
          f"transactions open elsewhere holding VACUUM back: {r['horizon_held_by']})")  # fmt: skip
    n1, t1 = r["verify_first"]
    print(f"appended {r['append_events_per_s']:.0f} events/s through record_many; "
          f"verify_audit: {n1} events in {t1:.1f} s, {r['verify_events']} in "
          f"{r['verify_wall_s']:.1f} s (ok={r['verify_ok']}), of which its walk "
          f"{r['verify_rate']:.0f} events/s (as it prints) and start-up "
          f"{r['verify_fixed_s']:.1f} s")  # fmt: skip
    print(f"a year at {r['hosts']} hosts: before {r['year_events_before'] / 1e6:.0f} M events, "
          f"verified in {r['year_verify_before_s'] / 60:.0f} min; after "
          f"{r['year_events_after'] / 1e6:.2f} M events (at least one a host a day), "
          f"{r['year_verify_after_s']:.1f} s (extrapolated, linear)")  # fmt: skip


if __name__ == "__main__":
    main()
