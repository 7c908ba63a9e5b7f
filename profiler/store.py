"""The profiler's history of monitoring data (paper section III.B: "the historical values of
monitoring data are being stored in a dataset"), on SQLite (docs/profiler.md, "History").

- HistoryStore: five tables (container, server, microservice and edge samples; flows), one
  row per sample and subject stamped with the sample time; a reading not taken is NULL,
  never 0; every add_* call is one transaction, on disk when it returns (WAL journal,
  synchronous=FULL);
- TABLES, PRIMARY_KEYS, SERIES, SERIES_COLUMNS, SCHEMA_VERSION: the schema, and the series
  GET /history serves.
"""
from __future__ import annotations

import csv
import math
import os
import sqlite3
import threading
from numbers import Real
from collections.abc import Iterable

SCHEMA_VERSION = 1

# Column kinds: "key" required non-empty text; "text" optional text; "num" optional
# float; "int" optional integer; "bool" optional 0/1; "flag" required 0/1.
TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "container_samples": (
        ("server", "key"), ("instance", "key"), ("microservice", "key"),
        ("cpu_percent", "num"), ("memory_percent", "num"), ("memory_bytes", "int"),
        ("rx_bytes_per_s", "num"), ("tx_bytes_per_s", "num"),
    ),
    "server_samples": (
        ("server", "key"), ("cpu", "num"), ("mem", "num"), ("net", "num"),
        ("stale", "bool"), ("age_s", "num"),
    ),
    "microservice_samples": (
        ("microservice", "key"), ("cpu", "num"), ("mem", "num"), ("net", "num"),
        ("pred_cpu", "num"), ("pred_mem", "num"), ("pred_net", "num"),
        ("alpha", "num"), ("beta", "num"), ("gamma", "num"), ("flow_class", "text"),
    ),
    "flows": (
        ("flow_id", "key"), ("microservice", "key"), ("server", "text"),
        ("instance", "text"), ("client", "text"), ("duration_s", "num"),
        ("bytes", "int"), ("packets", "int"), ("active", "flag"),
    ),
    "edge_samples": (
        ("edge", "key"), ("caller", "key"), ("callee", "key"), ("bytes_per_s", "num"),
        ("flows_per_s", "num"), ("rt_ms", "num"),
    ),
}
PRIMARY_KEYS = {"flows": "flow_id"}   # tables holding one row per subject, not per sample
_SQL_TYPE = {"key": "TEXT NOT NULL", "text": "TEXT", "num": "REAL", "int": "INTEGER",
             "bool": "INTEGER", "flag": "INTEGER NOT NULL"}

# series(kind, key, column): which table, which column identifies the subject, and
# which (numeric) columns may be asked for.
SERIES: dict[str, tuple[str, str]] = {
    "microservice": ("microservice_samples", "microservice"),
    "server": ("server_samples", "server"),
    "container": ("container_samples", "instance"),
    "edge": ("edge_samples", "edge"),          # key: "<caller>-><callee>"
}
SERIES_COLUMNS: dict[str, frozenset[str]] = {
    kind: frozenset(c for c, k in TABLES[table] if k in ("num", "int", "bool"))
    for kind, (table, _) in SERIES.items()
}


def _is_number(value) -> bool:
    """A real number and not a bool (the exact types first: ABC checks are slow, and the
    history takes thousands of values a period)."""
    kind = type(value)
    if kind is float or kind is int:
        return True
    return kind is not bool and isinstance(value, Real)


def _time(t: float) -> float:
    if not _is_number(t) or not math.isfinite(t):
        raise ValueError(f"t: expected a finite time in seconds, got {t!r}")
    return float(t)


def _converter(table: str, column: str, kind: str):
    """A function validating one value for ``table.column``; None (and NaN) become NULL
    where the column allows it."""
    where = f"{table}.{column}"

    def text(value):
        if value is None:
            if kind == "text":
                return None
            raise ValueError(f"{where}: required, got None")
        value = value if type(value) is str else str(value)
        if value == "":
            raise ValueError(f"{where}: required, got ''")
        return value

    def flag(value):
        if value is None:
            if kind == "bool":
                return None
            raise ValueError(f"{where}: required, got None")
        if type(value) not in (bool, int) or value not in (0, 1):
            raise ValueError(f"{where}: expected a boolean, got {value!r}")
        return int(value)

    def number(value):
        if value is None:
            return None
        if not _is_number(value):
            raise ValueError(f"{where}: expected a number or None, got {value!r}")
        if value != value:      # NaN
            return None
        return int(value) if kind == "int" else float(value)

    return text if kind in ("key", "text") else flag if kind in ("bool", "flag") else number


# Per table: (column, converter) in column order.
_CONVERTERS = {table: tuple((c, _converter(table, c, k)) for c, k in columns)
               for table, columns in TABLES.items()}


class HistoryStore:
    """SQLite history of container, server, microservice and edge samples and flows. One
    connection serves all threads, serialized by a lock.

    ``path`` may be ":memory:" (tests; no WAL there). Rows older than ``retention_s``
    are removed by :meth:`prune`, which the caller runs periodically.
    """

    def __init__(self, path: str, retention_s: float, read_only: bool = False) -> None:
        if isinstance(retention_s, bool) or not isinstance(retention_s, Real) \
                or not retention_s > 0:
            raise ValueError(f"retention_s: expected a number > 0, got {retention_s!r}")
        self.path = path
        self.retention_s = float(retention_s)
        self.read_only = read_only
        self._lock = threading.Lock()
        if read_only:
            self._db = self._open_read_only(path)
            return
        parent = os.path.dirname(path) if path != ":memory:" else ""
        if parent and os.path.exists(parent) and not os.path.isdir(parent):
            raise ValueError(f"{path}: {parent} is a file, not a directory")
        if parent:
            os.makedirs(parent, exist_ok=True)
        if os.path.isdir(path):
            raise ValueError(f"{path}: a directory, not a history database")
        try:
            # isolation_level=None: no implicit transactions; _write opens them explicitly.
            self._db: sqlite3.Connection | None = sqlite3.connect(
                path, check_same_thread=False, isolation_level=None, timeout=10.0)
        except sqlite3.Error as exc:         # e.g. no permission to create it
            raise ValueError(f"{path}: cannot be opened as a history database ({exc})") \
                from None
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._create_tables()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise ValueError(f"{path}: not a history database ({exc})") from None

    @classmethod
    def open_read_only(cls, path: str) -> HistoryStore:
        """An existing history, for reading: never created, migrated or checkpointed (the
        profiler may be writing it right now; WAL lets readers in alongside). ValueError
        naming the file when it is missing or not a history."""
        return cls(path, retention_s=1.0, read_only=True)

    @staticmethod
    def _open_read_only(path: str) -> sqlite3.Connection:
        if not os.path.isfile(path):
            raise ValueError(f"{path}: no such history file")
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False,
                                 isolation_level=None)
            names = {r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{path}: not a SQLite history ({exc})") from None
        if not names & set(TABLES):
            db.close()
            raise ValueError(f"{path}: no history tables (not a MALB profiler history?)")
        return db

    # -- schema ---------------------------------------------------------------

    def _create_tables(self) -> None:
        statements = []
        for table, columns in TABLES.items():
            defs = ", ".join(
                f"{c} {_SQL_TYPE[k]}" + (" PRIMARY KEY" if c == PRIMARY_KEYS.get(table) else "")
                for c, k in columns)
            statements.append(f"CREATE TABLE IF NOT EXISTS {table} (t REAL NOT NULL, {defs})")
            statements.append(f"CREATE INDEX IF NOT EXISTS {table}_t ON {table} (t)")
        for table, key in SERIES.values():
            statements.append(f"CREATE INDEX IF NOT EXISTS {table}_{key}_t ON {table} ({key}, t)")
        statements.append("CREATE INDEX IF NOT EXISTS flows_done ON flows (active, t)")
        statements.append(f"PRAGMA user_version={SCHEMA_VERSION}")
        self._write(statements)

    # -- writing --------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise ValueError("history store is closed")
        return self._db

    def _write(self, statements: Iterable) -> int:
        """Run (sql) or (sql, rows) items in one transaction; return rows changed."""
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            changed = 0
            try:
                for item in statements:
                    if isinstance(item, str):
                        cur = db.execute(item)
                    else:
                        cur = db.executemany(*item)
                    changed += max(cur.rowcount, 0)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # SQLite may already have rolled back itself
                    db.execute("ROLLBACK")
                raise
            return changed

    def _rows(self, table: str, t: float, rows: list[dict]) -> list[tuple]:
        """Validate ``rows`` for ``table`` (all of them, before anything is written)."""
        t = _time(t)
        converters = _CONVERTERS[table]
        names = {c for c, _ in converters}
        out = []
        for row in rows:
            if not row.keys() <= names:
                raise ValueError(f"{table}: unknown column(s) {sorted(set(row) - names)}")
            get = row.get
            out.append((t, *[conv(get(c)) for c, conv in converters]))
        return out

    def _insert(self, table: str, t: float, rows: list[dict], suffix: str = "") -> None:
        values = self._rows(table, t, rows)
        columns = ["t", *(c for c, _ in TABLES[table])]
        sql = (f"INSERT INTO {table} ({', '.join(columns)}) "
               f"VALUES ({', '.join('?' * len(columns))}){suffix}")
        self._write([(sql, values)])

    def add_container_samples(self, t: float, rows: list[dict]) -> None:
        """Rows: server, instance, microservice, cpu_percent, memory_percent,
        memory_bytes, rx_bytes_per_s, tx_bytes_per_s (readings may be None)."""
        self._insert("container_samples", t, rows)

    def add_server_samples(self, t: float, rows: list[dict]) -> None:
        """Rows: server, cpu, mem, net (percent of capacity), stale (bool), age_s."""
        self._insert("server_samples", t, rows)

    def add_microservice_samples(self, t: float, rows: list[dict]) -> None:
        """Rows: microservice, cpu, mem, net (measured), pred_cpu, pred_mem, pred_net,
        alpha, beta, gamma, flow_class."""
        self._insert("microservice_samples", t, rows)

    def add_edge_samples(self, t: float, rows: list[dict]) -> None:
        """Rows: edge ("caller->callee"), caller, callee, bytes_per_s, flows_per_s, rt_ms:
        the communication graph's edges at t."""
        self._insert("edge_samples", t, rows)

    def add_flows(self, t: float, rows: list[dict]) -> None:
        """Rows: flow_id, microservice, server, instance, client, duration_s, bytes,
        packets, active (bool, required).

        One row per flow_id holds its latest record (``t`` is that record's time): a
        later record replaces an earlier one, except that a completed flow is never
        turned back into an active one by a late, out-of-order active record.
        """
        updates = ", ".join(f"{c} = excluded.{c}" for c in ["t", *(c for c, _ in TABLES["flows"])]
                            if c != "flow_id")
        self._insert("flows", t, rows,
                     f" ON CONFLICT (flow_id) DO UPDATE SET {updates}"
                     f" WHERE flows.active = 1 OR excluded.active = 0")

    def prune(self, now: float) -> int:
        """Delete rows older than ``now - retention_s``; return how many were deleted."""
        cutoff = _time(now) - self.retention_s
        return self._write([(f"DELETE FROM {table} WHERE t < ?", [(cutoff,)])
                            for table in TABLES])

    def flush(self) -> None:
        """Checkpoint the WAL into the main database file.

        Every ``add_*`` is already durable when it returns; this only makes the
        ``.sqlite`` file complete on its own (e.g. before copying it).
        """
        with self._lock:
            self._conn().execute("PRAGMA wal_checkpoint(PASSIVE)")

    def close(self) -> None:
        """Checkpoint and close; further calls other than close() raise ValueError."""
        with self._lock:
            if self._db is None:
                return
            if not self.read_only:
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            self._db.close()
            self._db = None

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading --------------------------------------------------------------

    def _query(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._conn().execute(sql, args).fetchall()

    def completed_flows(self, since: float | None = None) -> list[tuple[float, str, float]]:
        """(t, microservice, duration_s) of completed flows, oldest first, optionally only
        those whose latest record is at or after ``since``."""
        sql = ("SELECT t, microservice, duration_s FROM flows "
               "WHERE active = 0 AND duration_s IS NOT NULL")
        args: tuple = ()
        if since is not None:
            sql += " AND t >= ?"
            args = (_time(since),)
        return self._query(sql + " ORDER BY t, rowid", args)

    def series(self, kind: str, key: str, column: str,
               since: float | None = None) -> list[tuple[float, float | None]]:
        """(t, value) of one column for one microservice, server or container
        (instance name), ordered by time; value None where it was unreadable."""
        if kind not in SERIES:
            raise ValueError(f"kind: expected one of {sorted(SERIES)}, got {kind!r}")
        if column not in SERIES_COLUMNS[kind]:
            raise ValueError(f"column: expected one of {sorted(SERIES_COLUMNS[kind])} "
                             f"for kind {kind!r}, got {column!r}")
        table, key_column = SERIES[kind]
        sql = f"SELECT t, {column} FROM {table} WHERE {key_column} = ?"
        args: tuple = (str(key),)
        if since is not None:
            sql += " AND t >= ?"
            args += (_time(since),)
        rows = self._query(sql + " ORDER BY t, rowid", args)
        return [(t, None if v is None else float(v)) for t, v in rows]

    def rows(self, table: str, columns: Iterable[str], since: float | None = None,
             until: float | None = None) -> list[tuple]:
        """(t, *columns) of every row of a table with since <= t <= until, by time."""
        if table not in TABLES:
            raise ValueError(f"table: expected one of {sorted(TABLES)}, got {table!r}")
        columns = list(columns)
        unknown = set(columns) - {c for c, _ in TABLES[table]}
        if unknown:
            raise ValueError(f"{table}: unknown column(s) {sorted(unknown)}")
        sql = f"SELECT {', '.join(['t', *columns])} FROM {table} WHERE 1 = 1"
        args: tuple = ()
        if since is not None:
            sql += " AND t >= ?"
            args += (_time(since),)
        if until is not None:
            sql += " AND t <= ?"
            args += (_time(until),)
        try:
            return self._query(sql + " ORDER BY t, rowid", args)
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{self.path}: {table}: {exc}") from None

    def counts(self) -> dict[str, int]:
        """Number of rows in each table."""
        return {table: self._query(f"SELECT COUNT(*) FROM {table}")[0][0] for table in TABLES}

    def export_csv(self, directory: str) -> list[str]:
        """Write ``<table>.csv`` (header, then rows by time; NULL as an empty field) for
        every table into ``directory``; return the paths."""
        os.makedirs(directory, exist_ok=True)
        paths = []
        for table, columns in TABLES.items():
            header = ["t", *(c for c, _ in columns)]
            rows = self._query(f"SELECT {', '.join(header)} FROM {table} ORDER BY t, rowid")
            path = os.path.join(directory, f"{table}.csv")
            with open(path, "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(header)
                writer.writerows(rows)
            paths.append(path)
        return paths
