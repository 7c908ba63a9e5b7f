"""The benchmarks (experiments/registry.py lists them, with what each measures, needs and where
its figures are written up).

    .venv/bin/python -m benchmarks list             # every benchmark
    .venv/bin/python -m benchmarks run <name> ...   # one, with its own flags (--help)
    sudo .venv/bin/python -m benchmarks             # `make bench`: those marked for it, at
                                                    # their default settings; results in
                                                    # results/bench/

`run <name>` is `python -m benchmarks.<name>`. The figures the docs quote name the command,
commit and data of their own runs (data/bench/).
"""
from __future__ import annotations

import importlib
import sys

from experiments.registry import command_line, of_kind


def main(argv=None) -> int:
    return command_line("python -m benchmarks", __doc__, ("benchmark",), make_bench, argv)


def make_bench() -> int:
    """The benchmarks marked for `make bench`, one after another; 1 if any failed."""
    status = 0
    for entry in of_kind("benchmark"):
        if entry.in_make_bench:
            print(f"[bench] python -m {entry.module}", flush=True)
            status |= importlib.import_module(entry.module).main([])
    return status


if __name__ == "__main__":
    sys.exit(main())
