"""Where the project's files are, run from a checkout or from an installed package
(`pip install .`, docs/setup.md).

- ROOT: the directory that holds the packages: the checkout, or site-packages when installed;
- IN_CHECKOUT: whether ROOT is a checkout (its pyproject.toml beside the packages);
- WORK: where relative paths of a configuration (a profiler's history) and results/ go: the
  checkout, else the directory the command started in;
- shipped(*parts): a file shipped with the code but kept outside the packages in a checkout,
  configs/... or api/... (docs/api/): common/shipped/ links to them in a checkout, and the
  wheel copies them there; the real path either way.
"""
from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IN_CHECKOUT = os.path.isfile(os.path.join(ROOT, "pyproject.toml"))
WORK = ROOT if IN_CHECKOUT else os.getcwd()
_SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shipped")


def shipped(*parts: str) -> str:
    """The path of configs/<...> or api/<...> as shipped (checkout or installed package)."""
    return os.path.realpath(os.path.join(_SHIPPED, *parts))
