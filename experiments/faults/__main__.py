"""python -m experiments.faults: the fault suite's command (command.py)."""
import sys

from experiments.faults.command import main

sys.exit(main())
