"""Taking a candidate out of an episode's workspace: intake into the store, and the
snapshot of D/T/H that goes with it. Validations, the submission and merges share these.

Trusts the store keeper (it bounds and stops intakes per episode). Does not trust the
workspace: every tree is copied through :mod:`vtbench.grader.intake` before anything
reads it, and a refused candidate is written to the ledger's events.

A request that snapshots and then asks the ledger (a reservation, a merge) does both in
:func:`kept_snapshot`: the episode's snapshots are taken one at a time, and the snapshot of
a request the ledger refuses leaves the history again, so ``snapshots.git`` holds only
snapshots that a validation, the submission or a candidate's lineage names.
"""

import logging
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


_guard = threading.Lock()
_episode_locks: dict[str, threading.Lock] = {}


@contextmanager
def kept_snapshot(episode: Episode, message: str) -> Iterator[Callable[[], Snapshot | None]]:
    """Yield a function that snapshots the workspace (on its first call, once); if the
    block raises, the snapshot is withdrawn: the branch moves back to its parent. The
    episode's other snapshots wait meanwhile, so none can be built on a withdrawn one."""
    with _guard:
        lock = _episode_locks.setdefault(episode.id, threading.Lock())
    with lock:
        taken: list[Snapshot | None] = []

        def take_once() -> Snapshot | None:
            if not taken:
                taken.append(snapshot(episode, message))
            return taken[0]

        try:
            yield take_once
        except BaseException:
            if taken and taken[0] is not None:
                withdraw(taken[0])
            raise


def withdraw(taken: Snapshot) -> None:
    """Move the branch from ``taken`` back to its parent (only if it still is ``taken``)."""
    from vtbench.workspace import git

    try:
        parent = git(taken.git_dir, taken.workspace, "rev-parse", "--verify", "--quiet",
                     f"{taken.commit}^")
        git(taken.git_dir, taken.workspace, "update-ref", "HEAD", parent, taken.commit)
    except (OSError, subprocess.CalledProcessError):
        log.exception("withdrawing snapshot %s failed", taken.commit)
