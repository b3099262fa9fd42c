"""Where an episode's wall time went: the agent's own work, training, grading, the runner.

Trusted code, observing from outside the sandbox. Nothing here reads what the agent says
about itself (a ``train_log.json`` is the agent's claim, and two trainings in parallel
would count twice if their durations were summed). Instead the runner samples, every
:data:`SAMPLE_SECONDS` while the agent runs, two facts it can see for itself:

- *training*: a process of the sandbox's tree runs a program of the workspace's
  ``trainer/`` folder (``python trainer/train.py``), or has torch loaded: a copy of the
  trainer run from ``alt_trainer/`` or ``/tmp`` trains just the same
  (:mod:`vtbench.episode.processes`, which also records what each training ran);
- *grading*: the grader's ledger holds a validation of the episode that has not settled.

Each interval between samples is counted once, as grading if a validation was pending,
else training if a training process ran, else agent time; so parallel trainings count as
the wall time they took, not the sum of their durations. The runner measures its own
spans (workspace and grader set-up, the leak audit, the gateway, until the agent starts;
stopping the agent and writing the record after its last sample) and the test scoring as
grading. Nothing is derived from the others: what the four parts leave of the wall time is
``unaccounted_seconds`` (a runner that died before ``--resume``, rounding), so that their
sum matching the wall time is a measurement, not a definition. The parts are also what a
resumed episode is charged against its budget (:func:`charged`).
"""

import time

from vtbench.episode.processes import ProcessWatch
from vtbench.episode.record import BudgetSpent

SAMPLE_SECONDS = 0.25
"""An interval is counted by what is seen at its end, so a step of the agent's own that is
shorter than this (a scripted agent writing its data between a validation and a training)
may be counted as the next part; a quarter of a second keeps that error small at a cost of
four ledger reads a second."""
CHECKPOINT_SECONDS = 5.0
"""How often the runner saves the record while the agent runs: a runner that dies loses
at most this much of the split, and its ``--resume`` charges the budget with what was
saved (:func:`charged`)."""
PARTS = ("agent_seconds", "training_seconds", "grading_seconds", "runner_seconds")


class TimeSplit:
    """Adds the agent's run to a record's ``spent``, split as the module docstring says."""

    def __init__(self, watch: ProcessWatch, spent: BudgetSpent) -> None:
        self.watch, self.spent = watch, spent
        self.last = time.time()
        """When the last interval counted ended (wall clock)."""

    def tick(self, grading: bool) -> None:
        """Count the time since the last tick by what is happening now (the process tree
        is sampled every tick, so what trains while a validation runs is recorded too)."""
        now = time.time()
        seconds, self.last = now - self.last, now
        training = self.watch.sample(now)
        if grading:
            self.spent.grading_seconds += seconds
        elif training:
            self.spent.training_seconds += seconds
        else:
            self.spent.agent_seconds += seconds


def measured(spent: BudgetSpent) -> float:
    """The seconds the four parts hold."""
    return sum(getattr(spent, part) for part in PARTS)


def charged(spent: BudgetSpent, began: float) -> float:
    """Seconds of the episode's budget used: what its runners measured (``spent`` as last
    saved) and this runner's time since ``began``. The time between a runner's death and
    its ``--resume`` is no one's work: it is not charged, and stays unaccounted."""
    return measured(spent) + time.time() - began


def close(spent: BudgetSpent, wall_seconds: float) -> None:
    """Round the split and say what its four parts leave of the wall time."""
    spent.unaccounted_seconds = round(wall_seconds - measured(spent), 1)
    spent.wall_seconds = round(wall_seconds, 1)
    for part in PARTS:
        setattr(spent, part, round(getattr(spent, part), 1))
