"""Benchmarks of the platform's real code paths (docs/controller.md, docs/profiler.md)."""
import os

# One BLAS thread, as `python -m profiler` sets it before numpy loads: profiler benchmarks
# fork ARMA fit workers from their own process, which inherit it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
