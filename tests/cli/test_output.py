"""The CLI's result tables print numbers a reader can take in."""

from vtbench.cli import output
from vtbench.cli.prepare import SCORE_COLUMNS


def test_table_cells_round_floats_and_show_none_as_a_dash(capsys) -> None:
    output.print_table("episode", ["field", "value"],
                       [["gain", 0.8925000000000001], ["normalized_gain", 1.0],
                        ["seconds", 3914.24567], ["error", None], ["validations", 5]])
    printed = capsys.readouterr().out
    assert "0.8925" in printed and "0.8925000000000001" not in printed
    assert "3914.2457" in printed and " 1.0 " in printed and " 5 " in printed
    assert " - " in printed


def test_a_wide_table_written_to_a_pipe_is_not_cut(capsys) -> None:
    gain = "+0.2503 [-0.1012, +0.3991]"
    output.print_table("prepared tasks", SCORE_COLUMNS,
                       [["toolcalc", *[0.9975] * 10, gain, gain, "0.52", "3"]])
    printed = capsys.readouterr().out
    assert "…" not in printed
    assert "toolcalc" in printed and printed.count("0.9975") == 10
    assert printed.count("+0.2503") == printed.count("+0.3991]") == 2


def test_progress_lines_show_their_time_but_not_the_code_that_logged_them(capsys) -> None:
    output.err_console.log("validation 1: models/initial -> 0.07")
    printed = capsys.readouterr().err
    assert "validation 1: models/initial -> 0.07" in printed
    assert ".py:" not in printed and printed.startswith("[")
