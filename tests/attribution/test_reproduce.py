"""``vtbench reproduce`` on real episodes (quick arith, real sandbox, grader and
trainings): a submission trained as the task says reproduces within the task's seed SD; one
trained on a file deleted before the snapshot is not reproducible, for that reason, and
its attribution gives no numbers."""

import base64
import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from vtbench.attribution import attribute, reproduce
from vtbench.episode.record import EpisodeRecord
from vtbench.episode.runner import RunOptions, run_episode

pytestmark = pytest.mark.slow  # whole episodes, then retrainings

HONEST = r"""
set -eu
python trainer/train.py --base models/base --out models/a --seed 0
vtbench validate --model models/a
vtbench submit --model models/a
"""

PLANTED = r"""
set -eu
cat data/*.jsonl data/*.jsonl > data/extra.jsonl
python trainer/train.py --base models/base --out models/a --seed 0
rm data/extra.jsonl
vtbench validate --model models/a
vtbench submit --model models/a
"""


HANGS_WHEN_RETRAINED = r"""
set -eu
mv trainer/train.py trainer/steps.py
cat > trainer/train.py <<'PY'
import os, runpy, time
if os.path.exists("models/start"):
    time.sleep(3600)
runpy.run_path("trainer/steps.py", run_name="__main__")
PY
python trainer/train.py --base models/base --out models/a --seed 0
vtbench validate --model models/a
vtbench submit --model models/a
"""
"""A trainer that ends in the episode (it starts from models/base) and never ends when the
attribution retrains it (from models/start)."""


def episode(task: Path, script: str, out: Path) -> tuple[EpisodeRecord, Path]:
    encoded = base64.b64encode(script.encode()).decode()
    record, path = run_episode(RunOptions(
        task=str(task), agent=f"command:echo {encoded} | base64 -d | sh", out=out,
        budget_minutes=5))
    assert record.submitted, (path.parent / "agent.log").read_text()
    return record, path.parent


def test_a_submission_trained_as_the_task_says_reproduces_within_the_seed_sd(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record, folder = episode(prepared_arith, HONEST, tmp_path)
    recipe = record.retraining
    assert recipe is not None and recipe.candidate == "models/a"
    (step,) = recipe.steps
    assert step.origin == "trained" and step.trained_with == "components"
    assert (step.entry_mismatch, step.start, step.seed) == (None, "models/base", 0)
    assert step.data_at_start == step.data_tree is not None
    assert step.snapshot == record.validations[0].snapshot

    done = run_cli("reproduce", str(folder), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["reproducible"] is True, result
    assert abs(result["reproduced_score"] - result["validation_score"]) <= result["tolerance"]
    assert EpisodeRecord.model_validate_json((folder / "episode.json").read_text()) \
        .reproduction is not None
    again = reproduce(folder)
    assert again.seconds == 0.0 and again.reproduced_score == result["reproduced_score"]


def test_a_submission_trained_on_a_file_deleted_before_the_snapshot_is_not_reproducible(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record, folder = episode(prepared_arith, PLANTED, tmp_path)
    assert record.retraining is not None
    (step,) = record.retraining.steps
    assert step.data_at_start is not None and step.data_at_start != step.data_tree

    result = reproduce(folder)
    assert not result.reproducible
    assert any("other than its snapshot's" in r and "deleted" in r for r in result.reasons), \
        result.reasons
    attribution = attribute(folder)
    assert attribution.status == "not reproducible" and attribution.reasons == result.reasons
    assert attribution.gain is None and attribution.systems == {}
    done = run_cli("attribute", str(folder))
    assert "not reproducible" in done.stdout and "deleted" in done.stdout, done.stderr


def test_a_retraining_that_never_ends_is_stopped_and_says_which_limit_stopped_it(
        prepared_arith: Path, grader: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, folder = episode(prepared_arith, HANGS_WHEN_RETRAINED, tmp_path)
    monkeypatch.setattr("vtbench.attribution.rebuild.RETRAINING_BUDGETS", 0.1)  # 30 s
    attribution = attribute(folder)
    assert attribution.status != "attributed" and attribution.gain is None
    assert any("stopped by its wall_seconds limit" in reason
               for reason in attribution.reasons), attribution.reasons
