"""Training the components did not do is never credited to them: an agent in the real
research sandbox trains with a copy of the trainer on other data, then with the real
trainer pointed at a config and data elsewhere, then as the task says. The real runner,
grader and report must tell the three apart, snapshot the copies, and count all three
trainings as training time."""

import base64
from pathlib import Path

import pytest

from vtbench.analysis.gitstore import SnapshotStore
from vtbench.analysis.loading import load_episode
from vtbench.analysis.pages import episode_section
from vtbench.episode.runner import RunOptions, run_episode
from vtbench.workspace import git

pytestmark = pytest.mark.slow  # three trainings and three validations in the sandbox

AGENT = r"""
set -eu
cp -r trainer alt_trainer
sed -i 's/torch.optim.AdamW/torch.optim.Adam/' alt_trainer/train.py
mkdir alt_data
cat data/*.jsonl | tail -n 40 > alt_data/rows.jsonl
python alt_trainer/train.py --base models/base --data alt_data --out models/outside
vtbench validate --model models/outside
sed 's/^lr = .*/lr = 3e-3/' trainer/config.toml > /tmp/alt.toml
python trainer/train.py --base models/base --config /tmp/alt.toml --data alt_data \
  --out models/flags
vtbench validate --model models/flags
python trainer/train.py --base models/base --out models/honest
vtbench validate --model models/honest
vtbench submit --model models/honest
"""


def test_training_outside_the_components_is_recorded_as_such_and_counted_as_training(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    encoded = base64.b64encode(AGENT.encode()).decode()
    record, path = run_episode(RunOptions(
        task=str(prepared_arith), agent=f"command:echo {encoded} | base64 -d | sh",
        out=tmp_path, budget_minutes=5))
    folder = path.parent
    assert record.submitted and len(record.validations) == 3, (folder / "agent.log").read_text()
    lineage = {c.name: c for c in record.candidates}
    outside, flags, honest = (lineage[f"models/{n}"] for n in ("outside", "flags", "honest"))
    assert outside.data_hash is None and outside.trainer_hash is None
    assert flags.data_hash is None and flags.trainer_hash is None
    assert (outside.trained_with, flags.trained_with, honest.trained_with) == (
        "outside", "outside", "components")
    git_dir, workspace = folder / "snapshots.git", folder / "workspace"
    assert honest.snapshot is not None and honest.data_hash == git(
        git_dir, workspace, "rev-parse", f"{honest.snapshot}:data")

    copy = next(p for p in outside.trained_by if "alt_trainer/train.py" in p.argv)
    assert copy.cwd == "/workspace" and copy.training
    assert "/workspace/alt_trainer/train.py" in copy.elsewhere
    assert "/workspace/alt_data" in copy.elsewhere
    (pointed,) = flags.trained_by
    assert pointed.argv[1:4] == ["trainer/train.py", "--base", "models/base"]
    assert {"/tmp/alt.toml", "/workspace/alt_data"} <= set(pointed.elsewhere)
    assert not next(p for p in honest.trained_by if p.training).elsewhere

    trainings = [p for p in record.processes if p.training]
    assert len(trainings) == 3, [p.argv for p in record.processes]
    seen = sum(p.last_seen - p.first_seen for p in trainings)
    assert record.spent.training_seconds >= seen - 1.0, (record.spent, seen)

    with SnapshotStore(workspace) as store:
        files = store.files(outside.snapshot or "", ("alt_trainer", "alt_data"))
        copied = store.blob(files["alt_trainer/train.py"])
    assert b"torch.optim.Adam(" in copied and "alt_data/rows.jsonl" in files

    section = episode_section(load_episode(folder), "command")
    assert section.count("trained outside the components") >= 4  # two steps, two lineages
