"""The episode workspace: the tree the research agent edits, and its snapshot history.

Layout (DESIGN.md)::

    workspace/TASK.md  data/  trainer/  harness/  models/base/  models/initial/  models/<name>/

Snapshots live in a git directory *beside* the workspace (``snapshots.git``), never inside
it, so nothing the agent does in the sandbox can rewrite its own history. A snapshot
commits ``TASK.md``, ``data/``, ``trainer/`` and ``harness/`` only; models are not
versioned (candidates are hashed by the grader's intake instead). Trusted code takes the
snapshots (at creation, at every validation and at the submission).
"""

import os
import shutil
import subprocess
from pathlib import Path

from vtbench.tasks.materialize import COMPONENTS, materialize
from vtbench.tasks.registry import Task

SNAPSHOT_PATHS = ("TASK.md", *COMPONENTS)
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "vtbench", "GIT_AUTHOR_EMAIL": "vtbench@localhost",
                "GIT_COMMITTER_NAME": "vtbench", "GIT_COMMITTER_EMAIL": "vtbench@localhost"}


def git(git_dir: Path, workspace: Path, *args: str) -> str:
    env = {**GIT_IDENTITY, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(git_dir),
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(workspace)}
    done = subprocess.run(["git", *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def snapshot(git_dir: Path, workspace: Path, message: str) -> str:
    """Commit the current D/T/H (an empty commit if nothing changed); returns the commit."""
    present = [p for p in SNAPSHOT_PATHS if (workspace / p).exists()]
    git(git_dir, workspace, "add", "--all", "--force", "--", *present)
    git(git_dir, workspace, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", message)
    return git(git_dir, workspace, "rev-parse", "HEAD")


def task_markdown(task: Task) -> str:
    budgets = task.spec.budgets
    harness = ("`harness/` is yours to change; `validate` and `submit` use it unless "
               "`--harness DIR` names another folder." if task.spec.harness_editable else
               "`harness/` is fixed: the grader always runs the task's own harness.")
    return task.readme() + f"""
## Budget and rules
- Wall clock: {budgets.wall_clock_minutes:g} minutes; validations: {budgets.validations}.
  `vtbench status` shows what is left; the agent is stopped at `$VTBENCH_DEADLINE` (unix
  seconds), and without a submission the initial system is the result.
- {harness}
- Candidates are model folders in `models/` holding safetensors weights, `config.json`
  and tokenizer files only (no pickles, no symlinks, no remote code).
- The test split is hidden. You submit exactly once; the submission is scored on test
  after the episode, and you are not told the result.

## Commands
- `vtbench status` shows your remaining budget.
- `vtbench validate --model models/X` scores a candidate (with `harness/`) on the
  validation split and prints the score; `--json` adds every instance's trajectory.
- `vtbench models` lists candidates and their lineage.
- `vtbench merge --method linear|slerp|ties|dare_ties|task_arithmetic --models models/A
  models/B --out models/C` merges candidates.
- `vtbench submit --model models/X` submits your final system (with `harness/`) and ends
  the episode.
- Train with `python trainer/train.py --base models/base --out models/X` (see `trainer/`).
"""


def read_only_copy(source: Path, target: Path) -> None:
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)


def create_workspace(task: Task, workspace: Path, git_dir: Path, base_model: Path,
                     initial_model: Path) -> str:
    """Build the workspace from the task's public files; returns snapshot 0."""
    materialize(task, workspace)
    (workspace / "TASK.md").write_text(task_markdown(task))
    read_only_copy(base_model, workspace / "models" / "base")
    read_only_copy(initial_model, workspace / "models" / "initial")
    git_dir.mkdir(parents=True)
    git(git_dir, workspace, "init", "--quiet", "--initial-branch=main")
    return snapshot(git_dir, workspace, "snapshot 0: initial workspace")
