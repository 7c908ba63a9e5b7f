"""All benchmarks: `make bench` (root). Results in results/bench/ (JSON and Markdown);
the figures quoted in docs/controller.md and docs/profiler.md come from these runs.

    sudo .venv/bin/python -m benchmarks      # every benchmark at its default settings

Each benchmark has its own flags: python -m benchmarks.controller --help,
python -m benchmarks.profiler_period --help, python -m benchmarks.decision_cost --help.
"""
from argparse import RawDescriptionHelpFormatter
import sys

from benchmarks import controller, decision_cost, profiler_period
from common.cli import ArgumentParser


def main(argv=None) -> int:
    ArgumentParser(prog="python -m benchmarks", description=__doc__,
                            formatter_class=RawDescriptionHelpFormatter
                            ).parse_args(argv)
    status = profiler_period.main([])
    status |= decision_cost.main([])
    status |= controller.main([])
    return status


if __name__ == "__main__":
    sys.exit(main())
