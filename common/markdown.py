"""Markdown for the reports the experiments and benchmarks write."""
from __future__ import annotations


def number(value, digits: int = 1) -> str:
    """A table cell: the number with thousands separators, or an en dash for none."""
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"
