"""The built-in reference agent: scripted co-design without an LLM.

Runs inside the research sandbox like any agent, using only the workspace, the trainer and
the grader client. It reads the task author's playbook (the task pack's ``reference.py``,
mounted read-only at ``$VTBENCH_PLAYBOOK``; it holds no split data) and works as a careful
researcher would, one change at a time so every validation can be attributed:

1. validate the initial model (baseline);
2. clean the data, retrain with the initial trainer, validate;
3. change the trainer (algorithm and hyperparameters), train two seeds in parallel (one
   that runs out of GPU memory beside the other trains again alone), validate both;
4. where the harness is editable, improve it and validate the best model with it;
5. merge the two seeds (linear), validate;
6. submit the best validated (model, harness); a training that fails ends the steps
   early, with the same submission.

Started again in a resumed episode, it walks the steps again and takes up what it
validated before (:class:`vtbench.agents.scripted.BestSoFar`): those validations are not
repeated, nor their models trained or merged again.

It watches the clock like every scripted agent (:mod:`vtbench.agents.scripted`): when the
episode's deadline is :data:`SUBMIT_MARGIN_S` away and it has not submitted yet, it
submits the best (model, harness) validated so far, or the initial model when nothing has
been validated, so a slow machine costs it the steps it did not reach, not the whole
episode.
"""

import argparse
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from vtbench.agents.scripted import SUBMIT_MARGIN_S as SUBMIT_MARGIN_S
from vtbench.agents.scripted import (
    WORKSPACE,
    BestSoFar,
    TrainingFailed,
    TrainingOutOfMemory,
    speaker,
)
from vtbench.client import GraderClient
from vtbench.tasks.materialize import apply_reference
from vtbench.tasks.registry import Task, load_task

say = speaker("reference")


class Researcher:
    def __init__(self, task: Task, client: GraderClient, seed: int) -> None:
        self.task, self.client, self.seed = task, client, seed
        self.harness = "harness" if task.spec.harness_editable else None
        self.board = BestSoFar(client, say)

    def run(self) -> None:
        """The steps of the module's docstring; a training that fails ends them early, and the
        agent submits the best it validated before (saying which training failed and why)."""
        self.board.watch_the_clock()
        try:
            self.research()
        except TrainingFailed as failure:
            say(str(failure))
            self.board.submit_best("a training failed")
        self.board.submit_best("done")

    def research(self) -> None:
        board = self.board
        board.validate("models/initial")
        apply_reference(self.task, WORKSPACE, components=("data",))
        board.validate(board.train("clean-data", self.seed))
        apply_reference(self.task, WORKSPACE, components=("trainer",))
        models = train_side_by_side(board.train, ["tuned-a", "tuned-b"], [self.seed, self.seed + 1])
        scores = {model: board.validate(model) for model in models}
        best = max(scores, key=lambda m: scores[m])
        if self.harness:
            apply_reference(self.task, WORKSPACE, components=("harness",))
            board.validate(best, harness=self.harness)
        if not board.kept("models/merged"):
            merged = self.client.merge("linear", models, [0.5, 0.5], "models/merged")
            say(f"merged {models} into {merged.model}")
        board.validate("models/merged", harness=self.harness)


def train_side_by_side(train_one: Callable[[str, int], str], names: list[str],
                       seeds: list[int]) -> list[str]:
    """Train the models at once with ``train_one(name, seed)`` (:meth:`BestSoFar.train`);
    one that ran out of GPU memory beside the others (one GPU shared by them) is trained
    again alone after them."""
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        futures = [pool.submit(train_one, name, seed)
                   for name, seed in zip(names, seeds, strict=True)]
        wait(futures)
    models = []
    for name, seed, future in zip(names, seeds, futures, strict=True):
        if isinstance(future.exception(), TrainingOutOfMemory):
            say(f"training {name} ran out of GPU memory beside another: training it alone")
            models.append(train_one(name, seed))
        else:
            models.append(future.result())
    return models


def main() -> None:
    parser = argparse.ArgumentParser(description="built-in reference agent")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    task = load_task(Path(os.environ["VTBENCH_PLAYBOOK"]))
    Researcher(task, GraderClient.from_environment(), args.seed).run()


if __name__ == "__main__":
    main()
