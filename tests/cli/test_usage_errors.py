"""A new user's first mistakes get typer's usage error and exit 2, never a traceback.

Each case runs the real entry point (:func:`vtbench.cli.main`) in this process, for every
command of the tree, so a command added later is covered without a line here. The commands
are read by attribute, not by class: typer bundles its own click.
"""

from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import pytest
import typer

from vtbench.cli import app, main


def leaf_commands() -> Iterator[tuple[list[str], Any]]:
    """(path, command) of every command that runs something."""
    def walk(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
        children = getattr(command, "commands", None)
        if children is None:
            yield path, command
            return
        for name, child in children.items():
            yield from walk(child, [*path, name])

    yield from walk(typer.main.get_command(app), [])


COMMANDS = list(leaf_commands())
IDS = [" ".join(path) for path, _ in COMMANDS]


def run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
             *args: str) -> tuple[int, str]:
    monkeypatch.setattr("sys.argv", ["vtbench", *args])
    with pytest.raises(SystemExit) as stopped:
        main()
    captured = capsys.readouterr()
    code = stopped.value.code
    return (code if isinstance(code, int) else 1), captured.out + captured.err


def assert_usage_error(code: int, printed: str, words: str) -> None:
    assert code == 2, printed
    assert "Traceback" not in printed
    assert "Usage: vtbench" in printed and words in printed


def test_the_command_tree_is_walked() -> None:
    assert {"run", "gateway usage", "grader status", "validate", "report"} <= set(IDS)


def test_an_unknown_command_is_a_usage_error(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert_usage_error(*run_main(monkeypatch, capsys, "bogus"), "No such command 'bogus'")
    assert_usage_error(*run_main(monkeypatch, capsys, "grader", "bogus"), "No such command")


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=IDS)
def test_every_command_answers_an_unknown_option_with_a_usage_error(
        path: list[str], command: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    printed = run_main(monkeypatch, capsys, *path, "--no-such-option")
    assert_usage_error(*printed, "No such option")


@pytest.mark.parametrize(("path", "command"), [
    (path, command) for path, command in COMMANDS
    if any(param.required for param in command.params)],
    ids=[name for name, (_, command) in zip(IDS, COMMANDS, strict=True)
         if any(param.required for param in command.params)])
def test_every_command_with_a_required_parameter_names_it_when_missing(
        path: list[str], command: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert_usage_error(*run_main(monkeypatch, capsys, *path), "Missing")


def typed_option(command: Any) -> str | None:
    """The first option whose value must be a number."""
    for param in command.params:
        if param.param_type_name == "option" and value_type(param) in (int, float, "integer",
                                                                       "float"):
            return str(param.opts[0])
    return None


def value_type(param: Any) -> Any:
    """A parameter's value type: typer's annotation where it bundles click, else click's
    type name."""
    descriptor = getattr(param, "type_descriptor", None)
    return descriptor.annotation if descriptor is not None else param.type.name


TYPED = [(path, typed_option(command)) for path, command in COMMANDS
         if typed_option(command) is not None]


@pytest.mark.parametrize(("path", "option"), TYPED, ids=[" ".join(p) for p, _ in TYPED])
def test_every_command_with_a_typed_option_refuses_a_bad_value(
        path: list[str], option: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    printed = run_main(monkeypatch, capsys, *path, option, "not-a-value")
    assert_usage_error(*printed, "Invalid value")


def test_version_prints_the_installed_version(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, printed = run_main(monkeypatch, capsys, "--version")
    assert (code, printed.strip()) == (0, f"vtbench {version('vtbench')}")
