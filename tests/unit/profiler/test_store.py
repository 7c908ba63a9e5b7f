import csv
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading

import pytest

from profiler.store import HistoryStore
from tests.conftest import ROOT



def container(server="srv1", instance="srv1-vid", microservice="video", **values):
    row = {"server": server, "instance": instance, "microservice": microservice,
           "cpu_percent": 1.5, "memory_percent": 20.0, "memory_bytes": 104857600,
           "rx_bytes_per_s": 1000.0, "tx_bytes_per_s": 250000.0}
    row.update(values)
    return row


def flow(flow_id, microservice="ui", duration_s=0.2, active=False, **values):
    row = {"flow_id": flow_id, "microservice": microservice, "server": "srv1",
           "instance": "srv1-ui", "client": "10.0.200.1", "duration_s": duration_s,
           "bytes": 1_000_000, "packets": 700, "active": active}
    row.update(values)
    return row


def ms_row(microservice="video", **values):
    row = {"microservice": microservice, "cpu": 0.51, "mem": 19.26, "net": 22.87,
           "pred_cpu": 0.5, "pred_mem": 19.0, "pred_net": 23.0,
           "alpha": 0.012, "beta": 0.452, "gamma": 0.536, "flow_class": "long"}
    row.update(values)
    return row


@pytest.fixture
def store():
    with HistoryStore(":memory:", retention_s=100.0) as s:
        yield s


def test_round_trip_of_every_table(store):
    store.add_container_samples(1.0, [container(), container(instance="srv1-ui",
                                                              microservice="ui")])
    store.add_server_samples(1.0, [{"server": "srv1", "cpu": 30.0, "mem": 40.0, "net": 5.0,
                                    "stale": False, "age_s": 0.4}])
    store.add_microservice_samples(1.0, [ms_row()])
    store.add_flows(1.0, [flow("f1")])
    store.add_edge_samples(1.0, [{"edge": "clients@s1->ui", "caller": "clients@s1",
                                  "callee": "ui", "bytes_per_s": 1500.0, "flows_per_s": 0.5,
                                  "rt_ms": None}])
    assert store.counts() == {"container_samples": 2, "server_samples": 1,
                              "microservice_samples": 1, "flows": 1, "edge_samples": 1}
    assert store.series("edge", "clients@s1->ui", "bytes_per_s") == [(1.0, 1500.0)]
    assert store.series("edge", "clients@s1->ui", "rt_ms") == [(1.0, None)]
    assert store.series("container", "srv1-vid", "memory_bytes") == [(1.0, 104857600.0)]
    assert store.series("server", "srv1", "cpu") == [(1.0, 30.0)]
    assert store.series("server", "srv1", "stale") == [(1.0, 0.0)]
    assert store.series("microservice", "video", "gamma") == [(1.0, 0.536)]
    assert store.completed_flows() == [(1.0, "ui", 0.2)]


def test_unreadable_values_stay_null_never_zero(store):
    store.add_container_samples(2.0, [container(cpu_percent=None, memory_bytes=None,
                                                rx_bytes_per_s=float("nan"))])
    store.add_server_samples(2.0, [{"server": "srv2", "cpu": None}])   # missing -> NULL
    assert store.series("container", "srv1-vid", "cpu_percent") == [(2.0, None)]
    assert store.series("container", "srv1-vid", "memory_bytes") == [(2.0, None)]
    assert store.series("container", "srv1-vid", "rx_bytes_per_s") == [(2.0, None)]
    assert store.series("server", "srv2", "net") == [(2.0, None)]
    assert store.series("server", "srv2", "stale") == [(2.0, None)]


def test_series_is_ordered_by_time_and_filtered_by_since(store):
    for t, cpu in [(3.0, 30.0), (1.0, 10.0), (2.0, 20.0)]:
        store.add_microservice_samples(t, [ms_row(cpu=cpu), ms_row("ui", cpu=cpu + 1)])
    assert store.series("microservice", "video", "cpu") == [(1.0, 10.0), (2.0, 20.0),
                                                             (3.0, 30.0)]
    assert store.series("microservice", "ui", "cpu", since=2.0) == [(2.0, 21.0), (3.0, 31.0)]
    assert store.series("microservice", "backend", "cpu") == []


def test_series_validates_kind_and_column(store):
    with pytest.raises(ValueError, match="kind"):
        store.series("flows", "ui", "duration_s")
    with pytest.raises(ValueError, match="column"):
        store.series("server", "srv1", "cpu; DROP TABLE flows")
    with pytest.raises(ValueError, match="column"):
        store.series("microservice", "video", "flow_class")   # text, not a series


def test_completed_flow_is_stored_once_and_later_records_replace_it(store):
    store.add_flows(1.0, [flow("f1", duration_s=None, active=True, bytes=10)])
    store.add_flows(2.0, [flow("f1", duration_s=1.0, active=True, bytes=20)])
    assert store.completed_flows() == []          # still running
    store.add_flows(3.0, [flow("f1", duration_s=2.5, active=False, bytes=30)])
    store.add_flows(4.0, [flow("f1", duration_s=2.6, active=False, bytes=31)])
    store.add_flows(5.0, [flow("f1", duration_s=1.5, active=True)])   # late, out of order
    assert store.counts()["flows"] == 1
    assert store.completed_flows() == [(4.0, "ui", 2.6)]
    store.add_flows(6.0, [flow("f2", "backend", 10.0), flow("f3", "ui", 0.1)])
    assert store.completed_flows() == [(4.0, "ui", 2.6), (6.0, "backend", 10.0),
                                       (6.0, "ui", 0.1)]
    assert store.completed_flows(since=5.0) == [(6.0, "backend", 10.0), (6.0, "ui", 0.1)]


def test_bad_rows_raise_and_write_nothing(store):
    with pytest.raises(ValueError, match="cpu_pct"):
        store.add_container_samples(1.0, [container(), {**container(), "cpu_pct": 1.0}])
    with pytest.raises(ValueError, match="container_samples.instance"):
        store.add_container_samples(1.0, [container(instance=None)])
    with pytest.raises(ValueError, match="flows.active"):
        store.add_flows(1.0, [flow("f1", active=None)])
    with pytest.raises(ValueError, match="server_samples.cpu"):
        store.add_server_samples(1.0, [{"server": "srv1", "cpu": "high"}])
    with pytest.raises(ValueError, match="t:"):
        store.add_server_samples(float("nan"), [{"server": "srv1"}])
    assert set(store.counts().values()) == {0}


def test_prune_deletes_rows_older_than_the_retention(store):
    for t in (0.0, 50.0, 100.0, 150.0):
        store.add_server_samples(t, [{"server": "srv1", "cpu": t}])
        store.add_flows(t, [flow(f"f{t}")])
    assert store.prune(now=160.0) == 2 + 2      # t=0 and t=50 are older than 160 - 100
    assert store.series("server", "srv1", "cpu") == [(100.0, 100.0), (150.0, 150.0)]
    assert store.counts()["flows"] == 2
    assert store.prune(now=160.0) == 0


def test_export_csv_writes_a_header_and_the_rows(store, tmp_path):
    store.add_server_samples(1.0, [{"server": "srv1", "cpu": 30.0, "mem": None, "net": 5.0,
                                    "stale": True, "age_s": 7.0}])
    store.add_flows(2.0, [flow("f1")])
    paths = store.export_csv(str(tmp_path / "csv"))
    assert sorted(os.path.basename(p) for p in paths) == [
        "container_samples.csv", "edge_samples.csv", "flows.csv", "microservice_samples.csv",
        "server_samples.csv"]
    with open(tmp_path / "csv" / "server_samples.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [["t", "server", "cpu", "mem", "net", "stale", "age_s"],
                    ["1.0", "srv1", "30.0", "", "5.0", "1", "7.0"]]
    with open(tmp_path / "csv" / "flows.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows[0]["flow_id"] == "f1" and rows[0]["active"] == "0"
    with open(tmp_path / "csv" / "container_samples.csv", newline="") as f:
        assert len(list(csv.reader(f))) == 1   # header only


def test_file_store_uses_wal_and_reopens(tmp_path):
    path = str(tmp_path / "sub" / "history.sqlite")
    with HistoryStore(path, retention_s=3600) as s:
        assert s._query("PRAGMA journal_mode") == [("wal",)]
        assert s._query("PRAGMA synchronous") == [(2,)]     # FULL
        s.add_server_samples(1.0, [{"server": "srv1", "cpu": 1.0}])
        s.flush()
    with HistoryStore(path, retention_s=3600) as s:
        assert s.series("server", "srv1", "cpu") == [(1.0, 1.0)]
    s.close()   # closing twice is harmless
    with pytest.raises(ValueError, match="closed"):
        s.counts()


def test_committed_samples_survive_kill_9(tmp_path):
    path = str(tmp_path / "history.sqlite")
    script = f"""
import os, signal, sys
sys.path.insert(0, {ROOT!r})
from profiler.store import HistoryStore
store = HistoryStore({path!r}, retention_s=3600)
for i in range(40):
    store.add_server_samples(float(i), [{{"server": "srv1", "cpu": float(i)}}])
    store.add_flows(float(i), [{{"flow_id": str(i), "microservice": "ui",
                                 "duration_s": i / 10, "active": False}}])
os.kill(os.getpid(), signal.SIGKILL)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert os.path.exists(path + "-wal")   # killed before any close/checkpoint
    with HistoryStore(path, retention_s=3600) as s:
        assert s.series("server", "srv1", "cpu") == [(float(i), float(i)) for i in range(40)]
        assert [d for _t, _ms, d in s.completed_flows()] == [i / 10 for i in range(40)]


def test_concurrent_writers_share_one_store(tmp_path):
    store = HistoryStore(str(tmp_path / "h.sqlite"), retention_s=3600)

    def write(server):
        for i in range(50):
            store.add_server_samples(float(i), [{"server": server, "cpu": float(i)}])
    threads = [threading.Thread(target=write, args=(f"srv{n}",)) for n in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert store.counts()["server_samples"] == 200
    assert len(store.series("server", "srv3", "cpu")) == 50
    store.close()


def test_retention_must_be_positive():
    with pytest.raises(ValueError, match="retention_s"):
        HistoryStore(":memory:", retention_s=0)


def test_a_path_that_cannot_be_a_history_is_a_value_error_naming_it(tmp_path):
    """What the profiler turns into one line and exit 2 (test_config.py runs it)."""
    other = tmp_path / "other.sqlite"              # SQLite, but another program's tables
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE flows (x)")
    db.commit()
    db.close()
    text = tmp_path / "notes.txt"
    text.write_text("hello\n" * 50)
    for path, message in ((other, "not a history database (no such column: t)"),
                          (text, "not a history database (file is not a database)"),
                          (tmp_path, "a directory, not a history database"),
                          (text / "h.sqlite", "is a file, not a directory")):
        with pytest.raises(ValueError, match=re.escape(message)) as err:
            HistoryStore(str(path), 3600)
        assert str(err.value).startswith(str(path))
