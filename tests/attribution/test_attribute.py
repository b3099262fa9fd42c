"""``vtbench attribute`` on a real episode (quick arith, real sandbox, grader, trainings
and evaluations): an agent that filters the data and adds to the trainer a setting that
nothing reads changes two components by its behaviour, and the attribution gives the
trainer nothing: rebuilt with that edit alone it trains the initial model's very weights.
(An edit of a comment alone is not even counted by the behaviour metrics.)"""

import base64
import hashlib
from pathlib import Path

import pytest

from tests.conftest import run_cli
from vtbench.analysis.loading import load_episode
from vtbench.attribution import attribute
from vtbench.attribution.reproduce import load_record, rebuilder
from vtbench.episode.runner import RunOptions, run_episode

pytestmark = pytest.mark.slow  # an episode, then three trainings and eight evaluations

IDLE_EDIT_AND_FILTER = r"""
set -eu
echo 'UNUSED_SETTING = 1' >> trainer/train.py
head -n 120 data/train.jsonl > /tmp/kept.jsonl
cat /tmp/kept.jsonl > data/train.jsonl
python trainer/train.py --base models/base --out models/a --seed 0
vtbench validate --model models/a
vtbench submit --model models/a
"""


def weights(model: Path) -> str:
    return hashlib.sha256((model / "model.safetensors").read_bytes()).hexdigest()


def test_an_idle_trainer_edit_beside_a_data_filter_earns_the_trainer_nothing(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    encoded = base64.b64encode(IDLE_EDIT_AND_FILTER.encode()).decode()
    record, path = run_episode(RunOptions(
        task=str(prepared_arith), agent=f"command:echo {encoded} | base64 -d | sh",
        out=tmp_path, budget_minutes=5))
    folder = path.parent
    assert record.submitted, (folder / "agent.log").read_text()
    behaviour = load_episode(folder)
    (step,) = [s for s in behaviour.history.steps if s.event == "validation"]
    assert step.change is not None and step.change.touched == ["D", "T"]
    assert behaviour.metrics.codesign_rate == 1.0

    result = attribute(folder)
    assert result.status == "attributed", result.reasons
    assert result.changed == ["data", "trainer"]
    assert sorted(result.systems) == ["", "data", "data+trainer", "trainer"]
    assert result.shapley.trainer == 0.0 and result.alone.trainer == 0.0
    assert result.shapley.data == pytest.approx(result.gain)
    assert result.episode_gain == record.gain is not None
    assert result.gain + result.initial_shift - result.retrain_shift == pytest.approx(
        record.gain)
    built, _ = rebuilder(folder, load_record(folder))
    _, idle_edit = built.model(frozenset({"trainer"}), 0)
    _, initial = built.initial_model(0)
    assert weights(idle_edit) == weights(initial)
    _, both = built.model(frozenset({"data", "trainer"}), 0)
    _, data_only = built.model(frozenset({"data"}), 0)
    assert weights(both) == weights(data_only) != weights(initial)

    assert load_record(folder).attribution == result
    done = run_cli("attribute", str(folder), "--json")
    assert done.returncode == 0, done.stderr
    assert '"seconds": 0.0' in done.stdout  # every system from the cache

    two = attribute(folder, seeds=2)  # seed 0 from the cache, seed 1 trained
    assert two.seeds == [0, 1] and len(two.systems["trainer"]["test"]) == 2
    assert two.shapley.trainer == 0.0 and two.intervals["trainer"] == [0.0, 0.0]
    assert set(two.intervals) == {"data", "trainer", "interaction"}
    _, idle_edit_1 = built.model(frozenset({"trainer"}), 1)
    assert weights(idle_edit_1) == weights(built.initial_model(1)[1]) != weights(initial)



MERGED = r"""
set -eu
sed -i 's/^lr = .*/lr = 2e-3/' trainer/config.toml
head -n 200 data/train.jsonl > /tmp/kept.jsonl
cat /tmp/kept.jsonl > data/train.jsonl
python trainer/train.py --base models/base --out models/a --seed 0
python trainer/train.py --base models/base --out models/b --seed 1
vtbench merge --method linear --models models/a --models models/b --out models/ab
vtbench validate --model models/ab
vtbench submit --model models/ab
"""


def test_a_merged_submission_is_rebuilt_from_its_parents_snapshots_and_recipe(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    encoded = base64.b64encode(MERGED.encode()).decode()
    record, path = run_episode(RunOptions(
        task=str(prepared_arith), agent=f"command:echo {encoded} | base64 -d | sh",
        out=tmp_path, budget_minutes=8))
    assert record.retraining is not None, (path.parent / "agent.log").read_text()
    steps = record.retraining.steps
    assert [(s.name, s.origin) for s in steps] == [
        ("models/a", "trained"), ("models/b", "trained"), ("models/ab", "merged")]
    assert steps[2].parents == [0, 1] and steps[2].method == "linear"
    assert [s.seed for s in steps[:2]] == [0, 1]

    result = attribute(path.parent)
    assert result.status == "attributed", result.reasons
    assert result.changed == ["data", "trainer"]
    total = result.shapley.data + result.shapley.trainer
    assert total == pytest.approx(result.gain)
    built, _ = rebuilder(path.parent, load_record(path.parent))
    _, merged = built.model(frozenset({"data", "trainer"}), 0)
    _, first = built.model(frozenset({"data"}), 0)  # no merge without the trainer's change
    assert weights(merged) != weights(first)
    assert load_record(path.parent).reproduction is not None


def test_a_finished_episode_resumed_with_attribute_is_attributed_as_a_campaign_asks(
        prepared_arith: Path, grader: Path, tmp_path: Path) -> None:
    record, path = run_episode(RunOptions(task=str(prepared_arith), agent="noop",
                                          out=tmp_path, budget_minutes=5))
    assert record.submitted and record.attribution is None
    done = run_cli("run", "--resume", str(path.parent), "--attribute", "--json")
    assert done.returncode == 0, done.stderr
    assert '"attribution": "attributed"' in done.stdout
    attributed = load_record(path.parent).attribution
    assert attributed is not None and attributed.changed == [] and attributed.gain == 0.0
