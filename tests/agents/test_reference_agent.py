"""The reference agent's trainings side by side: one that runs out of GPU memory beside the
other trains again alone (one GPU, shared by the episode's trainings); and in turn (one
core), the second only where the time left holds it."""

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from vtbench.agents.reference_agent import train_in_turn, train_side_by_side
from vtbench.agents.scripted import SUBMIT_MARGIN_S, TrainingFailed, TrainingOutOfMemory, train
from vtbench.client import DEADLINE_ENV
from vtbench.gpus import ran_out_of_memory

# A trainer whose device holds one training at a time: a second one started while the
# first runs fails as PyTorch does when the GPU's memory is gone.
ONE_AT_A_TIME_TRAINER = """
import argparse, os, sys, time
from pathlib import Path
parser = argparse.ArgumentParser()
for flag in ("--base", "--out", "--seed"):
    parser.add_argument(flag)
args = parser.parse_args()
try:
    held = os.open("device.lock", os.O_CREAT | os.O_EXCL)
except FileExistsError:
    sys.exit("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
time.sleep(1.0)
Path(args.out).mkdir(parents=True)
(Path(args.out) / "seed").write_text(args.seed)
with open("trainings.log", "a") as log:
    log.write(args.out + "\\n")
os.close(held)
os.unlink("device.lock")
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "train.py").write_text(ONE_AT_A_TIME_TRAINER)
    return tmp_path


def trainer_in(workspace: Path) -> Callable[[str, int], str]:
    return lambda name, seed: train(name, seed, print, workspace)


def test_a_training_that_ran_out_of_gpu_memory_beside_another_trains_again_alone(
        workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models = train_side_by_side(trainer_in(workspace), ["tuned-a", "tuned-b"], [0, 1])
    assert models == ["models/tuned-a", "models/tuned-b"]
    assert [(workspace / m / "seed").read_text() for m in models] == ["0", "1"]
    assert sorted((workspace / "trainings.log").read_text().split()) == models
    assert "ran out of GPU memory beside another: training it alone" in capsys.readouterr().out


def test_a_training_that_fails_otherwise_is_not_trained_again(workspace: Path) -> None:
    (workspace / "trainer" / "train.py").write_text("import sys; sys.exit('bad config')\n")
    with pytest.raises(TrainingFailed) as failure:
        train_side_by_side(trainer_in(workspace), ["tuned-a", "tuned-b"], [0, 1])
    assert not isinstance(failure.value, TrainingOutOfMemory)
    assert "bad config" in str(failure.value)


def test_out_of_memory_is_told_by_the_trainer_output_not_its_last_lines(
        workspace: Path) -> None:
    """PyTorch's message ends with advice about the allocator, hundreds of characters after
    the words that say the memory ran out."""
    advice = "If reserved but unallocated memory is large try setting ... " * 20
    (workspace / "trainer" / "train.py").write_text(
        f"import sys; sys.stderr.write('torch.OutOfMemoryError: CUDA out of memory. '"
        f" + {advice!r}); sys.exit(1)\n")
    with pytest.raises(TrainingOutOfMemory):
        train("tuned-a", 0, print, workspace)
    assert ran_out_of_memory("RuntimeError: CUDA out of memory. Tried to allocate")
    assert not ran_out_of_memory(f"{sys.executable}: can't open file 'trainer/train.py'")


def test_in_turn_each_model_is_validated_before_the_next_trains(
        workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The validations of the first model (with the improved harness too) come before the
    second training, so a deadline during it finds them done."""
    monkeypatch.setenv(DEADLINE_ENV, str(time.time() + SUBMIT_MARGIN_S + 60))
    events: list[str] = []
    models = train_in_turn(trainer_in(workspace), validated_into(events, workspace),
                           ["tuned-a", "tuned-b"], [0, 1])
    assert models == ["models/tuned-a", "models/tuned-b"]
    assert events == ["validated models/tuned-a after 1 training(s)",
                      "validated models/tuned-b after 2 training(s)"]


def test_in_turn_the_second_model_is_left_out_when_the_first_took_longer_than_the_time_left(
        workspace: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Each training sleeps a second: with the submit margin and half a second left after
    the first, a second one would not end before the agent must submit."""
    monkeypatch.setenv(DEADLINE_ENV, str(time.time() + SUBMIT_MARGIN_S + 1.5))
    models = train_in_turn(trainer_in(workspace), lambda model: None,
                           ["tuned-a", "tuned-b"], [0, 1])
    assert models == ["models/tuned-a"]
    assert not (workspace / "models" / "tuned-b").exists()
    assert "not training tuned-b:" in capsys.readouterr().out


def test_in_turn_the_time_a_model_needs_counts_its_validations(
        workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A training of one second whose validations take two more: with two and a half
    seconds and the submit margin left at the start, no second model."""
    monkeypatch.setenv(DEADLINE_ENV, str(time.time() + SUBMIT_MARGIN_S + 5.5))
    models = train_in_turn(trainer_in(workspace), lambda model: time.sleep(2.0),
                           ["tuned-a", "tuned-b"], [0, 1])
    assert models == ["models/tuned-a"]


def validated_into(events: list[str], workspace: Path) -> Callable[[str], None]:
    """A validation that notes, in ``events``, the model and how many trainings had ended."""
    def validate(model: str) -> None:
        trained = (workspace / "trainings.log").read_text().split()
        events.append(f"validated {model} after {len(trained)} training(s)")
    return validate
