"""The light baseline: the filter's data cleaning, then the tuner's search on the cleaned
data; the best lightweight work without changing a label, adding a row, changing the
training code or loss, or touching the harness.

1. validate the initial model;
2. clean ``data/`` as the filter does (:func:`vtbench.agents.filter_agent.filter_data`:
   malformed, off-format, mislabelled, repeated and contradicting rows go, rows in another
   format are rewritten into the harness's, with the same content);
3. the tuner's search over ``lr``, ``steps``, ``schedule`` and ``warmup_steps``
   (:class:`vtbench.agents.tuner_agent.Tuner`), every candidate trained on the cleaned
   data within the episode's budget and validated;
4. submit the best validated candidate with its config written back; when nothing beat
   the initial model, the initial model, with the data and config put back as shipped.

Runs inside the research sandbox (``python -m vtbench.agents.light_agent``).
:func:`first_candidate` is its first trained candidate made without a grader (the filter's
cleaning, the tuner's recipe): ``vtbench prepare --calibrate`` builds the task's ``light``
system with it, the measure of what lightweight work reaches on the task.
"""

import argparse
from pathlib import Path

from vtbench.agents.filter_agent import FilterCounts, clean_workspace_data, filter_data
from vtbench.agents.row_checks import row_check
from vtbench.agents.scripted import WORKSPACE, speaker
from vtbench.agents.tuner_agent import Tuner, hyperparameters, recipe, set_hyperparameters
from vtbench.client import GraderClient

say = speaker("light")


def first_candidate(workspace: Path) -> FilterCounts:
    """Make ``workspace`` (``data/``, ``trainer/``, ``harness/``) the light agent's first
    candidate: ``data/`` cleaned with the task's row check as :func:`run` cleans it, and
    ``trainer/config.toml`` set to the tuner's first candidate (:func:`recipe` of the
    shipped settings); the rest as it was."""
    counts = filter_data(workspace / "data", row_check(workspace))
    config = workspace / "trainer" / "config.toml"
    set_hyperparameters(config, recipe(hyperparameters(config)))
    return counts


def run(client: GraderClient, seed: int, workspace: Path = WORKSPACE) -> None:
    tuner = Tuner(client, seed, workspace, say)
    tuner.start()
    clean_workspace_data(client, workspace, say)
    tuner.search()
    tuner.finish()


def main() -> None:
    parser = argparse.ArgumentParser(description="built-in light agent (data filter and "
                                                 "trainer settings)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    run(GraderClient.from_environment(), args.seed)


if __name__ == "__main__":
    main()
