"""A resumed episode runs its agent again in the workspace the interrupted run left: the
lightweight agents begin their work again from the components as shipped, so the filter
finds the same rows to drop (and trains) and the tuner's recipe does not compound."""

from pathlib import Path

from vtbench.agents.filter_agent import filter_data
from vtbench.agents.row_checks import row_check
from vtbench.agents.scripted import SHIPPED, start_from_shipped
from vtbench.agents.tuner_agent import hyperparameters, recipe, set_hyperparameters
from vtbench.tasks import find_task
from vtbench.tasks.materialize import materialize


def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    materialize(find_task("extract"), folder)
    return folder


def contents(folder: Path) -> dict[str, bytes]:
    files = (p for p in sorted(folder.rglob("*")) if p.is_file())
    return {str(p.relative_to(folder)): p.read_bytes() for p in files
            if p.relative_to(folder).parts[0] != "models"}


def test_the_filter_started_again_finds_the_same_rows_to_drop(tmp_path: Path) -> None:
    folder = workspace(tmp_path)
    shipped = contents(folder)
    start_from_shipped(folder)
    first = filter_data(folder / "data", row_check(folder))
    assert first.dropped > 0
    start_from_shipped(folder)  # the resumed run
    assert contents(folder) == shipped
    assert filter_data(folder / "data", row_check(folder)) == first


def test_the_tuner_started_again_tunes_the_shipped_settings_not_its_own(
        tmp_path: Path) -> None:
    folder = workspace(tmp_path)
    config = folder / "trainer" / "config.toml"
    start_from_shipped(folder)
    first = recipe(hyperparameters(config))
    set_hyperparameters(config, first)
    start_from_shipped(folder)
    assert recipe(hyperparameters(config)) == first


def test_an_interrupted_first_save_is_made_again_from_the_workspace(tmp_path: Path) -> None:
    folder = workspace(tmp_path)
    shipped = contents(folder)
    partial = (folder / SHIPPED).with_name(f"{SHIPPED.name}.partial")
    (partial / "data").mkdir(parents=True)
    start_from_shipped(folder)
    assert not partial.exists()
    assert contents(folder / SHIPPED) == {k: v for k, v in shipped.items()
                                          if k.startswith("data/") or k == "trainer/config.toml"}
