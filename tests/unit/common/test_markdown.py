"""common/markdown.py: the reports' number cells and tables."""
import pytest

from common.markdown import number, table


def test_a_number_cell_has_thousands_separators_and_an_en_dash_for_none():
    assert number(12345.678) == "12,345.7"
    assert number(0.1234, 3) == "0.123"
    assert number(None) == "–"


def test_a_table_has_a_spaced_rule_with_one_alignment_per_column():
    assert table(["a", "b", "c"], [(1, "x", 2.5), ("y", 3, None)], "lr") == (
        "| a | b | c |\n"
        "| --- | ---: | --- |\n"
        "| 1 | x | 2.5 |\n"
        "| y | 3 | None |\n")


def test_a_compact_table_writes_its_rule_without_spaces():
    assert table(["policy", "CPU", "net"], [("SRR", "1.0", "2.0")], "lrr", compact=True) == (
        "| policy | CPU | net |\n"
        "|---|---:|---:|\n"
        "| SRR | 1.0 | 2.0 |\n")
    assert table(["n", "t"], [], "rr", compact=True) == "| n | t |\n|---:|---:|\n"


def test_a_bar_in_a_cell_is_escaped_and_a_short_row_refused():
    assert table(["a"], [("x|y",)]).splitlines()[-1] == "| x\\|y |"
    with pytest.raises(ValueError, match="a row of 1 cells in a table of 2"):
        table(["a", "b"], [("x",)])
