"""The experiments and analyses, with what each measures, needs and where it is written up
(experiments/registry.py). Run one: `python -m experiments.<name> --help`.

    .venv/bin/python -m experiments
"""
from __future__ import annotations

import sys
from argparse import RawDescriptionHelpFormatter

from common.cli import ArgumentParser
from experiments.registry import listing


def main(argv=None) -> int:
    ArgumentParser(prog="python -m experiments", description=__doc__,
                   formatter_class=RawDescriptionHelpFormatter).parse_args(argv)
    print(listing(("experiment", "analysis")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
