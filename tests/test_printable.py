"""Agent-controlled text shown as data: one inert line that encodes as UTF-8, and logging
that cannot raise into the work it reports."""

import io
import logging
import os

import pytest

from vtbench.printable import PrintableFormatter, printable, unfailing

HOSTILE = "models/[/][bold]\x1b[31m\x1b]0;t\x07\r\n%s%d{}{0}\u202egnp.exe" + os.fsdecode(b"\xff")


def test_a_hostile_name_becomes_one_inert_line_that_encodes_as_utf8() -> None:
    shown = printable(HOSTILE)
    assert shown == (r"models/[/][bold]\x1b[31m\x1b]0;t\x07\r\n%s%d{}{0}\u202egnp.exe\udcff")
    assert shown.isprintable() and shown.encode("utf-8")


def test_printable_text_is_left_as_it_is_and_a_limit_cuts_it_with_an_ellipsis() -> None:
    assert printable("models/été [x] 100%") == "models/été [x] 100%"
    assert printable("models/" + "L" * 300, 20) == "models/" + "L" * 12 + "…"
    assert printable("\n" * 10, 5) == "\\n\\n…"


def test_a_log_callable_that_raises_raises_nothing_and_the_line_goes_to_stderr(
        capfd: pytest.CaptureFixture[str]) -> None:
    seen: list[str] = []

    def broken(line: str) -> None:
        seen.append(line)
        raise ValueError("closing tag '[/]' has nothing to close")

    unfailing(broken)(f"validation 1: {HOSTILE} -> 0.5")
    assert seen == [f"validation 1: {printable(HOSTILE)} -> 0.5"]
    assert capfd.readouterr().err == ascii(seen[0])[1:-1] + "\n"


def test_a_log_file_keeps_one_line_per_message_whatever_its_arguments() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(PrintableFormatter("%(levelname)s %(message)s"))
    log = logging.getLogger("vtbench.test-printable")
    log.addHandler(handler)
    try:
        log.warning("validation %s failed: %s", 3, "models/a\nINFO forged line")
    finally:
        log.removeHandler(handler)
    assert stream.getvalue() == "WARNING validation 3 failed: models/a\\nINFO forged line\n"
