"""Rows into PostgreSQL with COPY, for the tables every probe writes to.

A probe round stores a hundred snapshots and eight hundred GPU samples per transaction. Django's
bulk INSERT builds one statement with a placeholder per value, and psycopg (client-side binding)
splits and quotes it in Python on every batch: that was the largest part of storing a snapshot
in the worker's profile (bench/README.md). COPY sends the same rows as data. Elsewhere (SQLite)
the callers keep bulk_create.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import connection
from django.db.models import Model


def copy_rows(model: type[Model], columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """COPY `rows` (values in the order of `columns`, as psycopg adapts them) into `model`'s
    table, on the default connection, in its transaction."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    names = ", ".join(quote(c) for c in columns)
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(row)


def copy_create(objects: Sequence[Model]) -> None:
    """What `Model.objects.bulk_create(objects)` does for unsaved objects of one model whose
    primary key is its database-generated `id`, through COPY: each object gets its id (in the
    objects' order, ascending) and is saved. Every other concrete field is stored as
    bulk_create would store it (`pre_save`, `get_db_prep_save`). No signals, as with bulk_create."""
    if not objects:
        return
    meta = type(objects[0])._meta
    pk = meta.pk
    assert pk is not None and pk.column == "id", "copy_create needs a database-generated id"
    fields = [f for f in meta.concrete_fields if f is not pk]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM (SELECT nextval(pg_get_serial_sequence(%s, 'id')) AS id"
            " FROM generate_series(1, %s)) AS ids ORDER BY id",
            [meta.db_table, len(objects)],
        )
        ids = [row[0] for row in cursor.fetchall()]
    rows = (
        [pk_value] + [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
        for obj, pk_value in zip(objects, ids, strict=True)
    )
    copy_rows(type(objects[0]), [pk.column] + [f.column for f in fields], rows)
    for obj, pk_value in zip(objects, ids, strict=True):
        obj.pk = pk_value
        obj._state.adding = False
        obj._state.db = connection.alias
