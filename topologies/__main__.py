"""Bring a testbed up, check it, use it, tear it down.

    sudo .venv/bin/python -m topologies up                 # paper testbed, until Ctrl-C
    sudo .venv/bin/python -m topologies up --cli           # ... with the Mininet CLI
    sudo .venv/bin/python -m topologies check              # up, connectivity check, down
    sudo .venv/bin/python -m topologies up --switches 3 --servers 6 --trunk-bw 20
    sudo .venv/bin/python -m topologies info               # naming and addressing table
    sudo .venv/bin/python -m topologies clean              # remove leftovers
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import time

from common.cli import (ArgumentParser, add_config_args, config_from_args, fail, require_root,
                        require_testbed)
from common.config import ConfigError, check_testbed_builds
from common.httpjson import JsonServer
from topologies.check import check_testbed, format_reach


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m topologies", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    for name, helptext in (("up", "bring the testbed up and keep it until Ctrl-C"),
                           ("check", "bring it up, check connectivity, tear it down"),
                           ("info", "print backend, datapath, names and addresses"),
                           ("clean", "remove leftovers of earlier testbeds")):
        sp = sub.add_parser(name, help=helptext)
        if name == "clean":
            sp.add_argument("--mininet", action="store_true",
                            help="also run `mn -c` (removes EVERY OVS bridge on the machine)")
            continue
        add_config_args(sp)
        sp.add_argument("--backend", choices=("auto", "containernet", "mininet"), default="auto",
                        help="emulator (default: Containernet when importable)")
        if name in ("up", "check"):
            sp.add_argument("--no-services", action="store_true",
                            help="do not start the microservices in the containers")
        if name == "up":
            sp.add_argument("--cli", action="store_true", help="open the Mininet CLI")
            sp.add_argument("--check", action="store_true",
                            help="run the connectivity check once the testbed is up")
    return p


def print_info(cfg, backend: str, datapath: str) -> None:
    tb = cfg.testbed
    print(f"backend: {backend}   datapath: {datapath}   controller: {tb.controller or 'none'}")
    print("switches: " + ", ".join(f"{s.name} (dpid {s.dpid})" for s in tb.switches))
    for t in tb.trunks:
        print(f"trunk {t.a}:{t.a_port} <-> {t.b}:{t.b_port}  "
              f"{(str(t.bw_mbit) + ' Mbit/s') if t.bw_mbit else 'unlimited'}")
    print(f"{'node':<12} {'role':<10} {'server':<7} {'ip':<13} {'mac':<18} {'switch:port'}")
    for i in cfg.instances:
        print(f"{i.name:<12} {i.microservice:<10} {i.server:<7} {i.ip:<13} {i.mac:<18} "
              f"{i.switch}:{i.switch_port}")
    for c in tb.clients:
        print(f"{c.name:<12} {'client':<10} {'-':<7} {c.ip:<13} {c.mac:<18} "
              f"{c.switch}:{c.switch_port}")
    if tb.proxy:
        p = tb.proxy
        print(f"{p.name:<12} {'proxy':<10} {'-':<7} {p.ip:<13} {p.mac:<18} "
              f"{p.switch}:{p.switch_port}")
    for m in cfg.microservices:
        print(f"microservice {m.name}: VIP {m.vip}:{m.port}/{m.protocol}, flows {m.flow_class}, "
              f"image {m.image}")
    for s in cfg.servers:
        print(f"server {s.name}: {s.cpu} CPU, {s.memory_mb} MB, on {s.switch}, agent {s.agent_url}")


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.command == "clean":
        require_root("clean")
        from common.testbed_lock import TestbedBusy
        from topologies.clean import clean_testbed   # deferred: Mininet and the Docker SDK
        try:
            return 1 if clean_testbed(mininet=args.mininet)["errors"] else 0
        except TestbedBusy as exc:
            fail(str(exc))
    require_root(args.command)
    cfg = config_from_args(args)
    try:
        check_testbed_builds(cfg)
    except ConfigError as exc:
        fail(str(exc), code=2)
    # deferred until the flags and the configuration are checked: Mininet, the Docker SDK
    from topologies import backend as backends
    from topologies.testbed import Testbed, TestbedOptions
    try:
        backend = backends.resolve_backend(args.backend)
        datapath = backends.resolve_datapath(args.datapath or cfg.testbed.datapath)
    except backends.BackendError as exc:
        fail(str(exc))
    if args.command == "info":
        print_info(cfg, backend, datapath)
        return 0
    require_testbed(args.command)

    from mininet.log import setLogLevel   # deferred: Mininet; info and flag errors need none
    setLogLevel(os.environ.get("MALB_MININET_LOG", "warning"))
    # Ctrl-C and SIGTERM both end in the `finally` below, which tears everything down.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    # A shell without job control starts background jobs with SIGINT ignored, and Python
    # keeps an inherited SIG_IGN: restore Ctrl-C so it still tears the testbed down.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    controller = "config"
    if args.command == "check" and cfg.testbed.controller and \
            not controller_answers(cfg.testbed.controller):
        # The check is about the testbed: with no controller the secure-mode switches would
        # forward nothing, and every instance would look unreachable.
        print(f"[topologies] no OpenFlow controller answers at {cfg.testbed.controller}: "
              f"checking with standalone (learning) switches instead", flush=True)
        controller = "none"
    opts = TestbedOptions(backend=backend, datapath=datapath, controller=controller,
                          start_services=not args.no_services)
    testbed = Testbed(cfg, opts)
    status, control = 0, None
    try:
        t0 = time.time()
        print(f"[topologies] bringing up {len(cfg.testbed.switches)} switch(es), "
              f"{len(cfg.servers)} servers, {len(cfg.instances)} containers, "
              f"{len(cfg.testbed.clients)} clients ({backend}, {datapath} datapath)", flush=True)
        testbed.start()
        print(f"[topologies] up in {time.time() - t0:.1f} s", flush=True)
        if args.command == "check" or getattr(args, "check", False):
            status = run_check(testbed, services=not args.no_services)
        if args.command == "up":
            control = start_control(testbed)
            if args.cli:
                from mininet.cli import CLI   # deferred: Mininet, as above
                CLI(testbed.net)
            else:
                # From here a signal only sets a flag: the exception the handlers above
                # raise can land anywhere, even inside the print below (one CI run hung
                # after SIGTERM there, and printed nothing).
                stop = threading.Event()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(sig, lambda *_: stop.set())
                print("[topologies] running; Ctrl-C tears it down", flush=True)
                while not stop.wait(1.0):
                    pass
                print("\n[topologies] interrupted", flush=True)
    except KeyboardInterrupt:
        print("\n[topologies] interrupted", flush=True)
    except (RuntimeError, TimeoutError, OSError) as exc:
        print(f"[topologies] error: {exc}", file=sys.stderr)
        status = 1
    finally:
        if control is not None:
            control.shutdown()
        t0 = time.time()
        testbed.stop()
        print(f"[topologies] torn down in {time.time() - t0:.1f} s", flush=True)
    return status


def start_control(testbed):
    """Serve the testbed's control API (placement moves) on loopback; None when the port is
    taken (said so: the testbed still runs)."""
    port = testbed.cfg.testbed.control_port
    try:
        server = JsonServer(("127.0.0.1", port), testbed.control_routes(), name="testbed",
                            token=testbed.cfg.security.token)
    except OSError as exc:
        print(f"[topologies] no control API on 127.0.0.1:{port} ({exc.strerror}); placement "
              f"moves cannot reach this testbed", file=sys.stderr, flush=True)
        return None
    server.start_background()
    print(f"[topologies] control API on http://127.0.0.1:{port} (instances)", flush=True)
    return server


def controller_answers(address: str, timeout_s: float = 1.0) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False


def run_check(testbed, services: bool = True) -> int:
    if not services:
        print("[topologies] --no-services: the TCP check needs the services; skipped")
        return 0
    missing = testbed.wait_services()
    if missing:
        print(f"[topologies] services not listening: {', '.join(missing)}", file=sys.stderr)
        return 1
    results = check_testbed(testbed)
    print(format_reach(results))
    bad = [r for r in results if not r.ok]
    print(f"[topologies] connectivity: {len(results) - len(bad)}/{len(results)} instances "
          f"reachable by ping and TCP from {testbed.cfg.testbed.clients[0].name}")
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ConfigError as exc:
        fail(f"configuration: {exc}", code=2)
