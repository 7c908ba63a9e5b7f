"""The benchmarks (experiments/registry.py lists them, with what each measures, needs and where
its figures are written up).

    .venv/bin/python -m benchmarks --list    # every benchmark
    sudo .venv/bin/python -m benchmarks      # `make bench`: those marked for it, at their
                                             # default settings; results in results/bench/

Each benchmark has its own flags: python -m benchmarks.<name> --help. The figures the docs
quote name the command, commit and data of their own runs (data/bench/).
"""
from __future__ import annotations

import importlib
import sys
from argparse import RawDescriptionHelpFormatter

from common.cli import ArgumentParser
from experiments.registry import listing, of_kind


def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m benchmarks", description=__doc__,
                        formatter_class=RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = ap.parse_args(argv)
    if args.list:
        print(listing(("benchmark",)))
        return 0
    status = 0
    for entry in of_kind("benchmark"):
        if entry.in_make_bench:
            print(f"[bench] python -m {entry.module}", flush=True)
            status |= importlib.import_module(entry.module).main([])
    return status


if __name__ == "__main__":
    sys.exit(main())
