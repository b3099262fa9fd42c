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
"""

import argparse
from pathlib import Path

from vtbench.agents.filter_agent import clean_workspace_data
from vtbench.agents.scripted import WORKSPACE, speaker
from vtbench.agents.tuner_agent import Tuner
from vtbench.client import GraderClient

say = speaker("light")


def run(client: GraderClient, seed: int, workspace: Path = WORKSPACE) -> None:
    tuner = Tuner(client, seed, workspace, say)
    tuner.start()
    _, restore = clean_workspace_data(client, workspace, say)
    tuner.undo.append(restore)
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
