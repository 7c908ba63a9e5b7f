"""Block: one generated results table in a doc (python -m experiments.standing writes and
checks them all)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    doc: str                        # the page, from the repository's root
    name: str                       # its markers' name, unique in the page
    sources: tuple[str, ...]        # the files under data/ it reads, in render's order
    render: Callable[..., str]      # (each source loaded: JSON parsed, text as is) -> Markdown
