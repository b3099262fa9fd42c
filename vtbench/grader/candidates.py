"""Taking a candidate out of an episode's workspace: intake into the store, and the
snapshot of D/T/H that goes with it. Validations, the submission and merges share these.

Trusts the store keeper (it bounds and stops intakes per episode). Does not trust the
workspace: every tree is copied through :mod:`vtbench.grader.intake` before anything
reads it, and a refused candidate is written to the ledger's events.
"""

import logging
import subprocess
from pathlib import Path

from vtbench.errors import GraderUnavailable, SnapshotRefused, VtbenchError
from vtbench.grader.intake import StoredCandidate, intake_from
from vtbench.grader.ledger import Episode, Ledger
from vtbench.grader.lineage import Snapshot
from vtbench.grader.storekeeper import StoreKeeper
from vtbench.layout import EpisodePaths

log = logging.getLogger("vtbench.grader")


def workspace_of(episode: Episode) -> Path:
    if episode.workspace is None:
        raise GraderUnavailable(f"episode {episode.id} has no workspace")
    return Path(episode.workspace)


def take(ledger: Ledger, store: StoreKeeper, episode: Episode, model: str, harness: str | None,
         harness_editable: bool) -> tuple[StoredCandidate, StoredCandidate | None]:
    """Intake the candidate; the harness only where the task lets the agent change it.
    Call inside ``store.request(episode)``."""
    workspace = workspace_of(episode)

    def stop() -> bool:
        return store.stopped(episode.id)

    try:
        stored_model = intake_from(workspace, model, "model", limits=store.limits(episode),
                                   stop=stop)
        store.record(episode.id, stored_model)
        stored_harness = None
        if harness_editable and harness is not None:
            stored_harness = intake_from(workspace, harness, "harness",
                                         limits=store.limits(episode), stop=stop)
            store.record(episode.id, stored_harness)
    except VtbenchError as err:
        ledger.log_event(episode.id, "candidate_refused", error=err.one_line())
        raise
    return stored_model, stored_harness


def snapshot(episode: Episode, message: str) -> Snapshot | None:
    """Commit D/T/H into the episode's ``snapshots.git`` beside the workspace, if any."""
    from vtbench.workspace import snapshot as commit

    if episode.workspace is None:
        return None
    workspace = Path(episode.workspace)
    git_dir = EpisodePaths.of_workspace(workspace).snapshots
    if not git_dir.is_dir():
        return None
    try:
        return Snapshot(commit(git_dir, workspace, message), git_dir, workspace)
    except (OSError, subprocess.CalledProcessError) as error:
        log.exception("snapshot of %s failed", episode.id)
        raise SnapshotRefused("the workspace could not be snapshotted "
                              f"({type(error).__name__})",
                              hint="validate again once the files are written") from error
