from pathlib import Path

import pytest

from tests.conftest import run_cli
from vtbench.errors import SpecError
from vtbench.spec import load_spec
from vtbench.tasks import load_task


def test_minimal_task_spec_loads(minimal_task: Path) -> None:
    spec = load_spec(minimal_task / "task.toml")
    assert spec.id == "mini"
    assert not spec.harness_editable
    assert spec.components.harness.decoding is not None


def edit(task: Path, old: str, new: str) -> None:
    toml = task / "task.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new))


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('val = 10', 'val = 0', "splits.val"),
        ('title = "A minimal task"', 'title = "A minimal task"\ntitel = "typo"', "titel"),
        ('scale = "tiny"', 'scale = "huge"', "scale"),
        ('decoding = { temperature = 0.0, max_tokens = 8 }', '', "components.harness"),
        ('module = "scorer.py"', 'module = "missing.py"', "scorer.module"),
    ],
)
def test_bad_spec_names_file_field_and_reason(minimal_task: Path, old: str, new: str,
                                              field: str) -> None:
    edit(minimal_task, old, new)
    with pytest.raises(SpecError) as err:
        load_spec(minimal_task / "task.toml")
    message = str(err.value)
    assert message.startswith(f"{minimal_task / 'task.toml'}: {field}")
    assert "\n" not in message


def test_invalid_toml_is_one_line(minimal_task: Path) -> None:
    (minimal_task / "task.toml").write_text("id = \n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(minimal_task / "task.toml")


def test_cli_validate_exits_2_with_one_line_on_bad_spec(minimal_task: Path) -> None:
    edit(minimal_task, 'val = 10', 'val = -3')
    result = run_cli("tasks", "validate", str(minimal_task))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "splits.val" in lines[0] and "task.toml" in lines[0]


def test_cli_validate_accepts_good_spec(minimal_task: Path) -> None:
    result = run_cli("tasks", "validate", str(minimal_task), "--json")
    assert result.returncode == 0, result.stderr
    assert '"valid": true' in result.stdout


def test_unknown_task_id_is_one_line_naming_the_known_ones() -> None:
    result = run_cli("tasks", "show", "no-such-task")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "unknown task 'no-such-task'" in result.stderr


def test_a_malformed_method_settings_table_is_one_line_naming_it(minimal_task: Path) -> None:
    table = minimal_task / "public" / "trainer.method.toml"
    table.write_text('["config.toml"]\nlr = 3\n')
    with pytest.raises(SpecError) as err:
        load_spec(minimal_task / "task.toml")
    assert str(err.value).startswith(f"{table}: config.toml.lr: Input should be a valid string")
    table.write_text('["config.toml"]\n"lora.enabled" = "which weights train"\n')
    assert load_task(minimal_task).method_settings == {"config.toml": ["lora.enabled"]}
