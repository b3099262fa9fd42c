"""What ``vtbench attribute`` costs against ``vtbench prepare --calibrate``, in one run.

On a copy of a tiny task with fewer training steps and smaller splits (so that the run
fits beside other work; both costs scale with the same trainings and evaluations), into a
fresh private store: ``prepare --calibrate`` for one seed (the initial, reference and
ablation systems, val and test), then one episode of a scripted agent that filters the data
and changes the trainer's learning rate (so two components change and the attribution has
four subsets), then ``attribute`` at one seed (its reproduction included), then
``attribute`` again (everything cached). Prints seconds and the ratio.

    python bench/attribution_cost.py --task arith --steps 30 --val 40 --test 80
"""

import argparse
import base64
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

AGENT = r"""
set -eu
sed -i 's/^lr = .*/lr = 2e-3/' trainer/config.toml
head -n 400 data/train.jsonl > /tmp/kept.jsonl
cat /tmp/kept.jsonl > data/train.jsonl
python trainer/train.py --base models/base --out models/a --seed 0
vtbench validate --model models/a
vtbench submit --model models/a
"""


def quick_copy(root: Path, task_id: str, steps: int, val: int, test: int) -> Path:
    from vtbench import layout

    tasks = root / "tasks"
    shutil.copytree(layout.BUILTIN_TASKS / task_id, tasks / task_id)
    shutil.copytree(layout.BUILTIN_TASKS / "_tiny", tasks / "_tiny")
    toml = tasks / task_id / "task.toml"
    text = re.sub(r"^val = \d+", f"val = {val}", toml.read_text(), flags=re.M)
    toml.write_text(re.sub(r"^test = \d+", f"test = {test}", text, flags=re.M))
    config = tasks / "_tiny" / "trainer" / "config.toml"
    config.write_text(re.sub(r"^steps = \d+", f"steps = {steps}", config.read_text(),
                             flags=re.M))
    reference = tasks / task_id / "reference.py"
    reference.write_text(re.sub(r"steps=\d+", f"steps={2 * steps}", reference.read_text()))
    return tasks / task_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="arith")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--val", type=int, default=40)
    parser.add_argument("--test", type=int, default=80)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["VTBENCH_HOME"] = str(Path(scratch) / "home")
        from vtbench.attribution import attribute
        from vtbench.episode.grader_process import running_grader
        from vtbench.episode.runner import RunOptions, run_episode
        from vtbench.prepare import prepare_task
        from vtbench.tasks import load_task

        task = load_task(quick_copy(Path(scratch), args.task, args.steps, args.val, args.test))
        begun = time.perf_counter()
        prepare_task(task, seeds=(0,), calibrate=True)
        calibrate = time.perf_counter() - begun
        encoded = base64.b64encode(AGENT.encode()).decode()
        with running_grader():
            record, path = run_episode(RunOptions(
                task=str(task.root), agent=f"command:echo {encoded} | base64 -d | sh",
                out=Path(scratch) / "runs", budget_minutes=15))
        begun = time.perf_counter()
        result = attribute(path.parent)
        first = time.perf_counter() - begun
        begun = time.perf_counter()
        attribute(path.parent)
        second = time.perf_counter() - begun
    print(f"task {args.task}: {args.steps} steps (reference {2 * args.steps}), "
          f"val {args.val}, test {args.test}")
    print(f"prepare --calibrate, one seed:  {calibrate:.1f} s")
    print(f"episode: submitted {record.submitted}, gain {record.gain}")
    print(f"attribute, one seed:            {first:.1f} s ({result.status}; changed "
          f"{result.changed}; gain {result.gain}; shapley {result.shapley.model_dump()}; "
          f"interaction {result.interaction})")
    print(f"attribute again (cached):       {second:.2f} s")
    print(f"ratio attribute / calibrate:    {first / calibrate:.2f} (goal <= 1)")


if __name__ == "__main__":
    main()
