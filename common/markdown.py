"""Markdown for the reports the experiments and benchmarks write, and the docs' generated
tables: number() for a cell, table() for a whole table."""
from __future__ import annotations

from collections.abc import Iterable, Sequence


def number(value, digits: int = 1) -> str:
    """A table cell: the number with thousands separators, or an en dash for none."""
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def table(headers: Sequence[str], rows: Iterable[Sequence], align: str = "",
          compact: bool = False) -> str:
    """A Markdown table, one line per row, ending in a newline. align: one letter per
    column, l or r (default l); compact: the rule line without spaces (|---|---:|, as the
    experiments' reports write it) instead of | --- | ---: |; a `|` inside a cell is
    escaped."""
    align = align.ljust(len(headers), "l")
    rule = ["---:" if a == "r" else "---" for a in align]

    def line(cells) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
    out = [line(headers), "|" + "|".join(rule) + "|" if compact else
           "| " + " | ".join(rule) + " |"]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"a row of {len(row)} cells in a table of {len(headers)}")
        out.append(line(row))
    return "\n".join(out) + "\n"
