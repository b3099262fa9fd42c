"""Taking a candidate out of an episode's workspace: intake into the store, and the
snapshot of D/T/H that goes with it. Validations, the submission and merges share these.

Trusts the store keeper (it bounds and stops intakes per episode). Does not trust the
workspace: every tree is copied through :mod:`vtbench.grader.intake` before anything
reads it, and a refused candidate is written to the ledger's events.

A request that snapshots and then asks the ledger (a reservation, a merge) does both in
:func:`kept_snapshot`: the episode's snapshots are taken one at a time, each within what
is left of the episode's store quota (the history's bytes on disk count against it, with
the candidates' trees), and the snapshot of a request the ledger refuses leaves the
history again, so ``snapshots.git`` holds only snapshots that a validation, the submission
or a candidate's lineage names.
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


def history_of(episode: Episode) -> tuple[Path, Path] | None:
    """(git directory, workspace) of the episode's snapshot history, if it has one."""
    if episode.workspace is None:
        return None
    workspace = Path(episode.workspace)
    git_dir = EpisodePaths.of_workspace(workspace).snapshots
    return (git_dir, workspace) if git_dir.is_dir() else None


def snapshot(episode: Episode, message: str, allowance: int | None = None) -> Snapshot | None:
    """Commit the workspace outside ``models/`` into the episode's ``snapshots.git``, if
    any, adding at most ``allowance`` bytes to it."""
    from vtbench.workspace import snapshot as commit

    found = history_of(episode)
    if found is None:
        return None
    git_dir, workspace = found
    try:
        return Snapshot(commit(git_dir, workspace, message, allowance), git_dir, workspace)
    except (OSError, subprocess.CalledProcessError) as error:
        log.exception("snapshot of %s failed", episode.id)
        raise SnapshotRefused("the workspace could not be snapshotted "
                              f"({type(error).__name__})",
                              hint="validate again once the files are written") from error


def last_snapshot(episode: Episode) -> Snapshot | None:
    """The latest snapshot, for a request that needs no new one."""
    from vtbench.workspace import head_commit

    found = history_of(episode)
    head = head_commit(*found) if found else ""
    return Snapshot(head, *found) if found and head else None


_guard = threading.Lock()
_episode_locks: dict[str, threading.Lock] = {}


@contextmanager
def kept_snapshot(episode: Episode, message: str,
                  store: StoreKeeper) -> Iterator[Callable[[], Snapshot | None]]:
    """Yield a function that snapshots the workspace (on its first call, once) within what
    is left of the episode's store quota; if the block raises, the snapshot is withdrawn:
    the branch moves back to its parent. The episode's other snapshots wait meanwhile, so
    none can be built on a withdrawn one."""
    with _guard:
        lock = _episode_locks.setdefault(episode.id, threading.Lock())
    with lock:
        taken: list[Snapshot | None] = []

        def take_once() -> Snapshot | None:
            if not taken:
                taken.append(snapshot(episode, message, store.left(episode)))
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
