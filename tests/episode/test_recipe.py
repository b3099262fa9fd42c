"""What the record keeps to retrain a submission: the training command read against the
task's trainer entry, and the components' trees as a training starts, comparable with the
snapshot's."""

from pathlib import Path

from vtbench.episode.recipe import match_entry
from vtbench.workspace import git, snapshot, tree_hash

ENTRY = ["python", "trainer/train.py", "--base", "{base}", "--data", "data", "--out", "{out}",
         "--seed", "{seed}"]


def test_the_scripted_agents_training_command_is_the_trainer_entry_with_its_seed() -> None:
    argv = ["/venv/bin/python3", "trainer/train.py", "--base", "models/base", "--out",
            "models/clean", "--seed", "2"]
    match = match_entry(argv, "/workspace", ENTRY, "models/clean")
    assert (match.mismatch, match.start, match.seed) == (None, "models/base", 2)


def test_a_command_that_leaves_options_out_takes_the_trainers_defaults() -> None:
    argv = ["python", "./trainer/train.py", "--base=/workspace/models/initial", "--out",
            "models/x/"]
    match = match_entry(argv, "/workspace", ENTRY, "models/x")
    assert (match.mismatch, match.start, match.seed) == (None, "models/initial", None)


def test_other_data_another_option_or_another_program_is_not_the_trainer_entry() -> None:
    def why(argv: list[str], cwd: str = "/workspace") -> str | None:
        return match_entry(argv, cwd, ENTRY, "models/x").mismatch

    base = ["python", "trainer/train.py", "--base", "models/base", "--out", "models/x"]
    assert why([*base, "--data", "alt_data"]) == \
        "it passes --data 'alt_data', the trainer entry 'data'"
    assert why([*base, "--config", "/tmp/c.toml"]) == \
        "it passes --config, which the trainer entry does not"
    assert why(["python", "alt_trainer/train.py", *base[2:]]) == \
        "it runs 'alt_trainer/train.py', not 'trainer/train.py'"
    assert why(base, cwd="/workspace/trainer") == "it ran from '/workspace/trainer', not the " \
        "workspace"
    assert why([*base[:-1], "models/y"]) == "its output folder is not models/x"


def test_the_tree_noted_as_a_training_starts_is_the_one_a_snapshot_records(
        tmp_path: Path) -> None:
    workspace, git_dir = tmp_path / "workspace", tmp_path / "snapshots.git"
    (workspace / "data" / "deep").mkdir(parents=True)
    (workspace / "data" / "rows.jsonl").write_text('{"prompt": "a", "completion": "b"}\n')
    (workspace / "data" / "deep" / "run.sh").write_text("echo\n")
    (workspace / "data" / "deep" / "run.sh").chmod(0o755)
    (workspace / "data" / "link").symlink_to("rows.jsonl")
    git_dir.mkdir()
    git(git_dir, workspace, "init", "--quiet")
    objects = sorted((git_dir / "objects").rglob("*"))
    noted = tree_hash(workspace / "data")
    assert sorted((git_dir / "objects").rglob("*")) == objects  # hashed, nothing written
    commit = snapshot(git_dir, workspace, "s")
    assert noted == git(git_dir, workspace, "rev-parse", f"{commit}:data")
    (workspace / "data" / "rows.jsonl").unlink()
    assert tree_hash(workspace / "data") != noted
    assert tree_hash(workspace / "missing") is None
