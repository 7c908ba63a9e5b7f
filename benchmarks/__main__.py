"""All benchmarks: `make bench` (root). Results in results/bench/ (JSON and Markdown);
the figures quoted in docs/controller.md and docs/profiler.md come from these runs."""
import sys

from benchmarks import controller, profiler_period


def main() -> int:
    status = profiler_period.main([])
    status |= controller.main([])
    return status


if __name__ == "__main__":
    sys.exit(main())
