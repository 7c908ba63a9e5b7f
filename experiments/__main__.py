"""The experiments and analyses, with what each measures, needs and where it is written up
(experiments/registry.py).

    .venv/bin/python -m experiments list              # (or with no arguments)
    .venv/bin/python -m experiments run <name> ...    # one, with its own flags (--help)

`run <name>` is `python -m experiments.<name>`.
"""
from __future__ import annotations

import sys
from experiments.registry import command_line, listing

KINDS = ("experiment", "analysis")


def main(argv=None) -> int:
    return command_line("python -m experiments", __doc__, KINDS, list_them, argv)


def list_them() -> int:
    print(listing(KINDS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
