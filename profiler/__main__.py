"""The microservices profiler.

    python -m profiler                           # serve (configuration: $MALB_CONFIG or
                                                 #   configs/paper.yaml)
    python -m profiler --predictor arma --window 50
    python -m profiler export --out results/history-csv   # history tables as CSV

API and figures: docs/profiler.md.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

from common.cli import ArgumentParser, fail, log_level, port_number, positive_float, \
    positive_int
from common.config import ConfigError, load_config


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m profiler", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", nargs="?", choices=("serve", "export"), default="serve")
    p.add_argument("--config", help="configuration file")
    p.add_argument("--host", help="listen address (default: profiler.listen_host)")
    p.add_argument("--port", type=port_number, help="listen port (default: profiler.listen_port)")
    p.add_argument("--predictor", choices=("rm", "arma"), help="rolling mean or ARMA")
    p.add_argument("--window", type=positive_int, help="predictor window (samples)")
    p.add_argument("--period", type=positive_float, help="collection period (seconds)")
    p.add_argument("--history", help="SQLite history file (default: profiler.history_path)")
    p.add_argument("--out", help="export: directory for the CSV files")
    p.add_argument("--log-level", type=log_level, default="INFO")
    return p


def main(argv=None) -> int:
    # One BLAS thread: on a small machine two threads per ARMA fit double its CPU time
    # (measured), and the worker inherits this before numpy loads.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    args = parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    overrides = {k: v for k, v in (("predictor", args.predictor), ("window", args.window),
                                   ("period_s", args.period), ("listen_port", args.port),
                                   ("listen_host", args.host), ("history_path", args.history))
                 if v is not None}
    try:
        cfg = load_config(args.config, {"profiler": overrides} if overrides else None)
    except ConfigError as exc:
        fail(f"configuration: {exc}", code=2)
    from profiler.store import HistoryStore   # deferred, as below: after the flags
    if args.action == "export":
        if not args.out:
            fail("export: --out DIRECTORY is required", code=2)
        try:
            store = HistoryStore.open_read_only(cfg.profiler.history_path)
        except ValueError as exc:
            fail(f"export: {exc} (give --history FILE, or profiler.history_path)", code=2)
        with store:
            try:
                paths = store.export_csv(args.out)
            except OSError as exc:
                fail(f"export: --out {args.out}: {exc.strerror}", code=2)
        for path in paths:
            print(path)
        return 0

    # deferred until the flags are checked: statsmodels (the predictors) and waitress
    from common.httpjson import JsonServer
    from profiler.service import ProfilerService
    p = cfg.profiler
    # the history first: a file that is not one (or cannot be made) is a configuration
    # error, one line and exit 2, before anything else starts
    try:
        store = HistoryStore(p.history_path, p.retention_s)
    except (OSError, ValueError) as exc:
        detail = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and \
            exc.strerror else str(exc)
        fail(f"configuration: profiler.history_path: {detail}", code=2)
    try:
        service = ProfilerService(cfg, store=store)
    except (OSError, ValueError) as exc:
        store.close()
        fail(f"cannot start the profiler: {exc}")
    try:
        http = JsonServer((p.listen_host, p.listen_port), service.routes(), name="profiler",
                          token=cfg.security.token)
    except OSError as exc:
        fail(f"cannot listen on {p.listen_host}:{p.listen_port}: {exc}")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    http.start_background()
    worker = threading.Thread(target=service.run, name="profiler-period", daemon=True)
    worker.start()
    logging.getLogger("malb.profiler").info(
        "profiler on http://%s:%d: %d servers, %d microservices, %s (w=%d), every %.1f s, "
        "history %s", p.listen_host, p.listen_port, len(cfg.servers), len(cfg.microservices),
        p.predictor, p.window, p.period_s, p.history_path)
    stop.wait()
    http.shutdown()
    service.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
